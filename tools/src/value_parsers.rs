//! Value parsers for clap shared by the subcommands: numbers checked where they are read,
//! so a bad one is refused with the flag's name; and the way back, from a value to the word
//! that asks for it.

/// A similarity threshold (clap's value parser): a number in `0..=1`; NaN, infinities and
/// numbers outside are refused, and clap names the flag.
pub fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Ok(_) => Err(format!("{s} is not a number in 0..=1")),
        Err(_) => Err(format!("{s} is not a number")),
    }
}

/// The word clap knows an enum value by (what `--flag WORD` takes).
pub fn value_name<T: clap::ValueEnum>(value: T) -> String {
    value.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned())
}

/// A finite number above zero (seconds, for timeouts).
pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number above 0")),
    }
}

/// An expiry window (`30d`, `12h`; clap's value parser): [`simdex::Expiry::parse`], whose
/// error names the text; clap names the flag.
pub fn expiry(s: &str) -> Result<simdex::Expiry, String> {
    simdex::Expiry::parse(s).map_err(|e| e.to_string())
}
