//! Progress bars on stderr, drawn only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};

/// A byte-counting bar of `len` bytes (a spinner when the length is unknown).
pub fn bytes(len: Option<u64>, what: &str) -> ProgressBar {
    let bar = match len {
        Some(len) => {
            ProgressBar::new(len).with_style(ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})").expect("valid template").progress_chars("=> "))
        }
        None => ProgressBar::new_spinner().with_style(ProgressStyle::with_template("{spinner} {msg} {bytes}").expect("valid template")),
    };
    bar.set_message(what.to_string());
    bar
}

/// A bar counting `len` steps.
pub fn steps(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len).with_style(ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})").expect("valid template").progress_chars("=> "));
    bar.set_message(what.to_string());
    bar
}

/// A spinner for work of unknown length.
pub fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner().with_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("valid template"));
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// Each pass's wall and CPU time (the process's user + system, all threads) on stderr, when
/// the environment sets `SIMDEX_PASS_TIMES` (a measuring aid: how many cores each pass kept
/// busy). CPU time is read from `/proc/self/stat` (Linux; elsewhere 0).
pub struct PassTimes {
    on: bool,
    at: (std::time::Instant, f64, f64),
}

impl PassTimes {
    pub fn from_env() -> PassTimes {
        PassTimes { on: std::env::var_os("SIMDEX_PASS_TIMES").is_some(), at: (std::time::Instant::now(), cpu_seconds("/proc/self/stat"), cpu_seconds("/proc/thread-self/stat")) }
    }

    /// Prints `what()` beside the passes' times.
    pub fn note(&self, what: impl FnOnce() -> String) {
        if self.on {
            eprintln!("{}", what());
        }
    }

    /// Ends the pass `name` (begun at the last call) and begins the next.
    pub fn pass(&mut self, name: &str) {
        if !self.on {
            return;
        }
        let now = (std::time::Instant::now(), cpu_seconds("/proc/self/stat"), cpu_seconds("/proc/thread-self/stat"));
        let (wall, cpu, this) = (now.0.duration_since(self.at.0).as_secs_f64(), now.1 - self.at.1, now.2 - self.at.2);
        eprintln!("pass {name}: wall {wall:.3} s, cpu {cpu:.3} s ({:.2} cores), of it the calling thread {this:.3} s", cpu / wall.max(1e-9));
        self.at = now;
    }
}

/// The user + system CPU seconds of the process (`/proc/self/stat`) or of the calling thread
/// (`/proc/thread-self/stat`), in clock ticks of 1/100 s.
pub(crate) fn cpu_seconds(stat: &str) -> f64 {
    let stat = std::fs::read_to_string(stat).unwrap_or_default();
    // the fields after the command name (in parentheses, which may hold spaces): utime is
    // the 14th field of the line, stime the 15th
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    f.iter().sum::<f64>() / 100.0
}
