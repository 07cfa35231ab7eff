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
