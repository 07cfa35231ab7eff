//! How the CLI shows an index's expiry window (`stats`, `inspect`): the window, its
//! granularity and how old the oldest live pairs are, as UTC dates and ages read from the
//! same wall clock the index reads ([`simdex::SystemClock`]).

use simdex::{Clock, Expiry, Stats, SystemClock};

/// `expiry: none` or `expiry: 30d (granularity 3d18h); oldest live slice from 2026-10-28
/// 18:00:00 UTC (30d ago)`.
pub fn window_line(s: &Stats) -> String {
    let Some(x) = s.expiry else { return "expiry: none (nothing expires)".to_string() };
    let oldest = match s.oldest_live_secs {
        Some(t) => format!("oldest live slice from {} ({} ago)", utc(t), Expiry::format_secs(SystemClock.now_secs().saturating_sub(t))),
        None => "nothing live stored".to_string(),
    };
    format!("expiry: after {x}; {oldest}")
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian
/// calendar, days to civil date after Howard Hinnant's `civil_from_days`).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3_600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_800_000_000), "2027-01-15 08:00:00 UTC");
    }
}
