//! Subcommand registry: one module per subcommand, each with `Args` and `run`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod dedup;
mod fingerprint;

/// simdex: an on-disk index of 64-bit simhash fingerprints that answers
/// "have I already stored a near-duplicate of this?"
#[derive(Debug, Parser)]
#[command(name = "simdex", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Fingerprint(fingerprint::Args),
    Dedup(dedup::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Dedup(args) => dedup::run(args),
    }
}
