//! `simdex`: build, query, inspect and verify simhash indexes from the command line.
//!
//! Every subcommand lives in its own file under `cmd/` as an `Args` struct (clap) and a
//! `run` function. Errors are reported through `anyhow` with the file, offset or argument
//! they concern; the process exits non-zero on any error.

// The `Args` structs' doc comments are clap's `--help` text, where `<TAB>` is the literal
// placeholder a user reads, not an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

/// `println!` that returns the write error instead of panicking: a closed pipe
/// (`simdex plan ... | head -1`) then ends the command quietly in `main`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

mod cmd;
mod corpus;
mod expiry_text;
mod input;
mod log_recovery;
mod memory;
mod ordered;
mod plot;
mod progress;
mod recipe_args;
mod value_parsers;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        // A closed pipe (`simdex dump FILE | head`) is the reader's choice, not an error.
        Err(err) if is_broken_pipe(&err) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("simdex: error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}
