//! `simdex`: build, query, inspect and verify simhash indexes from the command line.
//!
//! Every subcommand lives in its own file under `cmd/` as an `Args` struct (clap) and a
//! `run` function. Errors are reported through `anyhow` with the file, offset or argument
//! they concern; the process exits non-zero on any error.

mod cmd;
mod corpus;
mod recipe;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("simdex: error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
