//! Subcommand registry: one module per subcommand, each with `Args` and `run`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod batch;
mod bench;
mod build;
mod cluster;
mod compact;
mod dedup;
mod delete;
mod dump;
mod dump_log;
mod fingerprint;
mod insert;
mod inspect;
mod plan;
mod query;
mod recover;
mod replace;
mod serve;
mod split;
mod stats;
pub mod tune;
mod verify;

/// simdex: an on-disk index of 64-bit simhash fingerprints that answers
/// "have I already stored a near-duplicate of this?"
///
/// Exit status: 0 on success, 1 when `verify` or `dump-log` finds damage, 2 on any error.
#[derive(Debug, Parser)]
#[command(name = "simdex", version, about, long_about = None, propagate_version = true)]
#[command(
    after_help = "Examples (every subcommand's --help ends with its own):\n  simdex dedup corpus/\n  simdex bench generate --count 100000 > stored.txt\n  simdex build --out stored.sdx stored.txt\n  simdex query stored.sdx -k 3 0123456789abcdef"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Plan(plan::Args),
    Build(build::Args),
    Query(query::Args),
    Inspect(inspect::Args),
    Verify(verify::Args),
    Dump(dump::Args),
    Bench(bench::Args),
    Batch(batch::Args),
    Cluster(cluster::Args),
    Split(split::Args),
    Fingerprint(fingerprint::Args),
    Dedup(dedup::Args),
    #[command(alias = "add")]
    Insert(insert::Args),
    Delete(delete::Args),
    Replace(replace::Args),
    Compact(compact::Args),
    Stats(stats::Args),
    DumpLog(dump_log::Args),
    Recover(recover::Args),
    Tune(tune::Args),
    Serve(serve::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plan(a) => plan::run(a).map(|_| ExitCode::SUCCESS),
        Command::Build(a) => build::run(a).map(|_| ExitCode::SUCCESS),
        Command::Query(a) => query::run(a).map(|_| ExitCode::SUCCESS),
        Command::Inspect(a) => inspect::run(a).map(|_| ExitCode::SUCCESS),
        Command::Verify(a) => verify::run(a),
        Command::Dump(a) => dump::run(a).map(|_| ExitCode::SUCCESS),
        Command::Bench(a) => bench::run(a).map(|_| ExitCode::SUCCESS),
        Command::Batch(a) => batch::run(a).map(|_| ExitCode::SUCCESS),
        Command::Cluster(a) => cluster::run(a).map(|_| ExitCode::SUCCESS),
        Command::Split(a) => split::run(a).map(|_| ExitCode::SUCCESS),
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Dedup(args) => dedup::run(args),
        Command::Insert(a) => insert::run(a).map(|_| ExitCode::SUCCESS),
        Command::Delete(a) => delete::run(a).map(|_| ExitCode::SUCCESS),
        Command::Replace(a) => replace::run(a).map(|_| ExitCode::SUCCESS),
        Command::Compact(a) => compact::run(a).map(|_| ExitCode::SUCCESS),
        Command::Stats(a) => stats::run(a).map(|_| ExitCode::SUCCESS),
        Command::DumpLog(a) => dump_log::run(a),
        Command::Recover(a) => recover::run(a).map(|_| ExitCode::SUCCESS),
        Command::Tune(a) => tune::run(a).map(|_| ExitCode::SUCCESS),
        Command::Serve(a) => serve::run(a).map(|_| ExitCode::SUCCESS),
    }
}
