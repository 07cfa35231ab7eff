//! The `--log-recovery` flag of the commands that open an index for writing, and the
//! report of a loss opened past: what `simdex::LogRecovery` chooses, as clap sees it.

use clap::{Args, ValueEnum};
use simdex::{Index, LogRecovery};

/// What to do when a log holds less than the manifest recorded as acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Refuse to open; the error names the log, the offset and the operations lost.
    #[default]
    Strict,
    /// Open with everything before the loss, report what was lost, and skip the lost
    /// sequence numbers (run `simdex verify` first; `simdex recover` salvages more).
    PointInTime,
}

/// `--log-recovery MODE`, flattened into a command's arguments.
#[derive(Clone, Copy, Debug, Args)]
pub struct LogRecoveryArg {
    /// When a log holds less than the manifest recorded (a cut, damaged or missing log):
    /// refuse to open (strict), or open at the point in time before the loss and report it
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Mode::Strict)]
    pub log_recovery: Mode,
}

impl LogRecoveryArg {
    /// The library's choice.
    pub fn mode(self) -> LogRecovery {
        match self.log_recovery {
            Mode::Strict => LogRecovery::Strict,
            Mode::PointInTime => LogRecovery::PointInTime,
        }
    }
}

/// Prints to stderr what an open found lost (opened past with `point-in-time`).
pub fn warn_of_loss(index: &Index) {
    let report = index.open_report();
    for lost in &report.lost {
        eprintln!("simdex: warning: lost: {lost}");
    }
}
