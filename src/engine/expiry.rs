//! The expiry window: what an index with [`IndexOptions::expiry`](super::IndexOptions::expiry)
//! forgets, and when. This module owns the time data of an index: the [`Expiry`] window and its
//! granularity, the wall [`Clock`], the *time slices* (epochs) that stamp the log, the
//! memtables and the segments, the manifest's expiry section (`format-spec/manifest.md`,
//! version 4) and the live view that hides what expired. Which expired segments compaction
//! drops, and which segments may merge, is `compaction::expiry`'s policy.
//!
//! Time is cut into slices of `granularity` seconds, aligned on the Unix epoch: slice `e`
//! holds the times `e * g ..= e * g + g - 1`. Every insert is stamped with the slice of the
//! wall clock when it is written, or with the slice of its log if the clock reads earlier (a
//! clock set back never stamps an insert older than one before it in the log). A log holds the
//! inserts of one slice (its header names it): the first insert of a later slice rotates the
//! log, so every memtable and every segment a flush writes holds one slice, and compaction
//! merges only segments of one slice. At time `now` a slice is live when it is at least
//! `slice(now) - ceil(window / g)`; entries of older slices never match, from any call, and
//! compaction drops their segments whole. So an entry younger than the window always matches,
//! and one older than `window + g` never does (`g` divides the window: see [`Expiry::after`]).
//! What is stamped is the time a pair was *stored*: a query that finds it does not refresh it
//! (a page seen again every day expires a window after it was stored, and is stored again the
//! next time it is checked).

use std::fmt;
use std::path::Path;
use std::time::Duration;

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::error::{Error, Result};

/// The largest time slice a log header can name (its 32-bit field).
pub(crate) const MAX_EPOCH: u64 = u32::MAX as u64;

/// An expiry window: pairs stored more than `window` ago stop matching (within the
/// granularity), and compaction drops them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    window: u64,
    granularity: u64,
}

impl Expiry {
    /// A window of `window` (whole seconds, at least one) with the default granularity: the
    /// window divided by the smallest whole number of slices, at least 8, that divides it
    /// exactly (30 days: 3.75-day slices; 100 s: 10-second slices; a window under 8 s: 1 s).
    /// So a pair never matches once it is older than `window + granularity`, and the
    /// granularity is at most an eighth of the window (windows of 8 s and more).
    pub fn after(window: Duration) -> Result<Self> {
        let secs = window.as_secs();
        if secs == 0 || window.subsec_nanos() != 0 {
            return Err(Error::InvalidArgument(format!("an expiry window of {window:?}: it takes whole seconds, at least 1")));
        }
        let slices = (8..=secs).find(|n| secs % n == 0).unwrap_or(secs);
        Self::with_granularity(window, Duration::from_secs(secs / slices))
    }

    /// A window with an explicit granularity, a whole number of seconds that divides the window.
    pub fn with_granularity(window: Duration, granularity: Duration) -> Result<Self> {
        let (w, g) = (window.as_secs(), granularity.as_secs());
        if w == 0 || g == 0 || window.subsec_nanos() != 0 || granularity.subsec_nanos() != 0 || w % g != 0 {
            return Err(Error::InvalidArgument(format!(
                "expiry window {window:?} with granularity {granularity:?}: both whole seconds, at least 1, the granularity dividing the window"
            )));
        }
        Ok(Self { window: w, granularity: g })
    }

    /// Parses a window as the CLI, Python and Scrapy take it: a whole positive number and a
    /// unit, `s`, `m` (minutes), `h`, `d` or `w` (`30d`, `12h`). Anything else, `0d` and
    /// `-1d` included, is [`Error::InvalidArgument`] naming the text.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::InvalidArgument(format!("expiry window {text:?}: {why} (a whole positive number and a unit: s, m, h, d or w, as in 30d)"));
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| bad("no unit"))?;
        let (number, unit) = t.split_at(split);
        if number.is_empty() {
            return Err(bad(if unit.starts_with('-') { "negative" } else { "no number" }));
        }
        let n: u64 = number.parse().map_err(|_| bad("too large"))?;
        let scale = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(bad(&format!("unknown unit {unit:?}"))),
        };
        if n == 0 {
            return Err(bad("zero: nothing would ever match"));
        }
        let secs = n.checked_mul(scale).filter(|&s| s <= MAX_WINDOW_SECS).ok_or_else(|| bad("longer than 100 years"))?;
        Self::after(Duration::from_secs(secs))
    }

    /// The window.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window)
    }

    /// The granularity: the length of a time slice.
    pub fn granularity(&self) -> Duration {
        Duration::from_secs(self.granularity)
    }

    /// The slice of the time `secs` (seconds since the Unix epoch).
    pub(crate) fn epoch_of(&self, secs: u64) -> u64 {
        secs / self.granularity
    }

    /// The first second of slice `epoch`.
    pub(crate) fn epoch_start(&self, epoch: u64) -> u64 {
        epoch.saturating_mul(self.granularity)
    }

    /// The oldest slice still live at `now_secs`.
    pub(crate) fn oldest_live_epoch(&self, now_secs: u64) -> u64 {
        self.epoch_of(now_secs).saturating_sub(self.window.div_ceil(self.granularity))
    }

    /// Whether pairs of slice `epoch` still match at `now_secs`.
    pub(crate) fn is_live(&self, epoch: u64, now_secs: u64) -> bool {
        epoch >= self.oldest_live_epoch(now_secs)
    }
}

/// The longest window taken (100 years): time slices must fit a log header's 32-bit field.
const MAX_WINDOW_SECS: u64 = 100 * 366 * 86_400;

impl fmt::Display for Expiry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (granularity {})", Self::format_secs(self.window), Self::format_secs(self.granularity))
    }
}

impl Expiry {
    /// `secs` in days, hours, minutes and seconds (`30d`, `3d18h`, `45s`): how windows,
    /// granularities and ages are written.
    pub fn format_secs(secs: u64) -> String {
        let mut out = String::new();
        let mut rest = secs;
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
            if rest >= size {
                out.push_str(&format!("{}{unit}", rest / size));
                rest %= size;
            }
        }
        if out.is_empty() {
            out.push_str("0s");
        }
        out
    }
}

/// The wall clock an index reads its time from (seconds since the Unix epoch). Tests inject
/// their own; [`SystemClock`] is the default.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Seconds since the Unix epoch now.
    fn now_secs(&self) -> u64;
}

/// The system's wall clock, read through the C library's `clock_gettime(CLOCK_REALTIME)`
/// (so `LD_PRELOAD` clock shims such as libfaketime apply). A clock before 1970 reads as 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[cfg(target_os = "linux")]
    fn now_secs(&self) -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration, and
        // CLOCK_REALTIME is always supported; on failure `ts` stays zero.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        if rc != 0 {
            return 0;
        }
        u64::try_from(ts.tv_sec).unwrap_or(0)
    }

    #[cfg(not(target_os = "linux"))]
    fn now_secs(&self) -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }
}

/// The slice a new insert is stamped with: the clock's, or `floor` (the slice of the log it
/// goes to) when the clock reads earlier. Fails past [`MAX_EPOCH`].
pub(crate) fn stamp(expiry: &Expiry, now_secs: u64, floor: Option<u64>) -> Result<u64> {
    let e = expiry.epoch_of(now_secs).max(floor.unwrap_or(0));
    if e > MAX_EPOCH {
        return Err(Error::InvalidArgument(format!("the clock reads {now_secs} s after 1970, past the last time slice a log can name")));
    }
    Ok(e)
}

/// Bytes of the manifest's expiry record (version 4): window and granularity in seconds.
pub const EXPIRY_RECORD_BYTES: usize = 16;
/// Bytes per segment in the manifest's slice list (version 4): the segment's time slice.
pub const SEGMENT_EPOCH_BYTES: usize = 8;

/// Appends the manifest's expiry section: the record, then one slice per segment in the
/// manifest's segment order.
pub(crate) fn encode_section(out: &mut Vec<u8>, expiry: &Expiry, epochs: impl Iterator<Item = u64>) {
    out.extend_from_slice(&expiry.window.to_le_bytes());
    out.extend_from_slice(&expiry.granularity.to_le_bytes());
    for e in epochs {
        out.extend_from_slice(&e.to_le_bytes());
    }
}

/// Decodes the expiry section of `bytes` (exactly the record and `segments` slices), which
/// starts at byte `offset` of the manifest `path`.
pub(crate) fn decode_section(path: &Path, offset: usize, bytes: &[u8], segments: usize) -> Result<(Expiry, Vec<u64>)> {
    let Some((record, epochs)) = bytes.split_first_chunk::<EXPIRY_RECORD_BYTES>() else {
        return Err(Error::corrupt(path, offset as u64, "the expiry record is cut short"));
    };
    if epochs.len() != segments.saturating_mul(SEGMENT_EPOCH_BYTES) {
        return Err(Error::corrupt(path, (offset + EXPIRY_RECORD_BYTES) as u64, format!("{} bytes of segment time slices for {segments} segments", epochs.len())));
    }
    let (window, granularity) = (LE::read_u64(&record[..8]), LE::read_u64(&record[8..]));
    let expiry = Expiry::with_granularity(Duration::from_secs(window), Duration::from_secs(granularity))
        .map_err(|_| Error::corrupt(path, offset as u64, format!("expiry window {window} s with granularity {granularity} s: not a window")))?;
    let mut out = vec![0u64; segments];
    LE::read_u64_into(epochs, &mut out);
    if let Some(i) = out.windows(2).position(|w| w.first() > w.get(1)) {
        let at = offset + EXPIRY_RECORD_BYTES + (i + 1) * SEGMENT_EPOCH_BYTES;
        return Err(Error::corrupt(path, at as u64, "segment time slices go back in time: segments are stored oldest first"));
    }
    Ok((expiry, out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_and_bad_ones_are_refused_by_name() {
        let w = Expiry::parse("30d").unwrap();
        assert_eq!((w.window().as_secs(), w.granularity().as_secs()), (2_592_000, 324_000));
        assert_eq!(Expiry::parse("100s").unwrap().granularity().as_secs(), 10);
        assert_eq!(Expiry::parse("7s").unwrap().granularity().as_secs(), 1);
        assert_eq!(Expiry::parse("2w").unwrap().window().as_secs(), 14 * 86_400);
        for bad in ["30x", "0d", "-1d", "d", "30", "", "1.5d", "99999999999999999999d", "200000w"] {
            let e = Expiry::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        assert!(Expiry::with_granularity(Duration::from_secs(100), Duration::from_secs(30)).is_err());
    }

    #[test]
    fn younger_than_the_window_is_live_older_than_window_plus_granularity_is_not() {
        // every window up to 200 s against an oracle over every insert time and age
        for w in 1..=200u64 {
            let x = Expiry::after(Duration::from_secs(w)).unwrap();
            let g = x.granularity;
            assert!(w % g == 0 && (w < 8 || g * 8 <= w), "w {w} g {g}");
            for t in 1_000..1_000 + 2 * g {
                let e = x.epoch_of(t);
                for age in 0..=w + g + 1 {
                    let live = x.is_live(e, t + age);
                    if age <= w {
                        assert!(live, "w {w}: stored at {t}, {age} s old");
                    }
                    if age > w + g {
                        assert!(!live, "w {w}: stored at {t}, {age} s old");
                    }
                }
            }
        }
    }

    #[test]
    fn stamps_never_go_back_within_a_log() {
        let x = Expiry::parse("80s").unwrap();
        assert_eq!(stamp(&x, 1_000, None).unwrap(), 100);
        assert_eq!(stamp(&x, 900, Some(100)).unwrap(), 100, "a clock set back keeps the log's slice");
        assert!(stamp(&x, u64::MAX, None).is_err());
        assert_eq!(Expiry::format_secs(324_000), "3d18h");
    }

    #[test]
    fn the_section_roundtrips_and_bad_bytes_are_corrupt() {
        let x = Expiry::parse("30d").unwrap();
        let mut b = Vec::new();
        encode_section(&mut b, &x, [5, 5, 7].into_iter());
        assert_eq!(decode_section(Path::new("M"), 0, &b, 3).unwrap(), (x, vec![5, 5, 7]));
        assert!(decode_section(Path::new("M"), 0, &b, 2).unwrap_err().is_corruption());
        let mut back = b.clone();
        back[16..24].copy_from_slice(&9u64.to_le_bytes());
        assert!(decode_section(Path::new("M"), 0, &back, 3).unwrap_err().is_corruption());
        let mut zero = b;
        zero[..8].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_section(Path::new("M"), 0, &zero, 3).unwrap_err().is_corruption());
    }

    #[test]
    fn the_worked_example_of_the_spec() {
        // format-spec/manifest.md, "Expiry section", worked example
        let mut b = Vec::new();
        encode_section(&mut b, &Expiry::parse("30d").unwrap(), [5556, 5560].into_iter());
        let spec = "00 8d 27 00 00 00 00 00 a0 f1 04 00 00 00 00 00 b4 15 00 00 00 00 00 00 b8 15 00 00 00 00 00 00";
        let want: Vec<u8> = spec.split(' ').map(|h| u8::from_str_radix(h, 16).unwrap()).collect();
        assert_eq!(b, want);
        assert_eq!(Expiry::parse("30d").unwrap().epoch_start(5556), 1_800_144_000, "2027-01-17 00:00:00 UTC");
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock() {
        let std_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        assert!(SystemClock.now_secs().abs_diff(std_now) <= 2);
    }
}
