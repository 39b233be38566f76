//! Parsing and formatting of the units Varnish users write: durations
//! (`10s`, `1.5m`, `2h`, `1d`, `1w`, `1y`, `ms`) and byte sizes (`8k`, `256m`,
//! `1g`).

use std::fmt;

/// Why a value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

/// Parses a duration in seconds. A bare number is seconds; suffixes are
/// `ms`, `s`, `m`, `h`, `d`, `w`, `y`.
pub fn parse_duration(input: &str) -> Result<f64, UnitError> {
    let s = input.trim();
    let (num, suffix) = split_number(s);
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError(format!("invalid duration \"{input}\"")))?;
    if !value.is_finite() {
        return Err(UnitError(format!("invalid duration \"{input}\"")));
    }
    let scale = match suffix {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        "y" => 365.0 * 86400.0,
        _ => {
            return Err(UnitError(format!(
            "invalid duration \"{input}\": unknown unit \"{suffix}\" (use ms, s, m, h, d, w or y)"
        )))
        }
    };
    Ok(value * scale)
}

/// Parses a byte size. A bare number is bytes; suffixes `b`, `k`, `m`, `g`,
/// `t` (optionally followed by `b`) are powers of 1024.
pub fn parse_bytes(input: &str) -> Result<u64, UnitError> {
    let s = input.trim();
    let (num, suffix) = split_number(s);
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError(format!("invalid size \"{input}\"")))?;
    if !value.is_finite() || value < 0.0 {
        return Err(UnitError(format!("invalid size \"{input}\"")));
    }
    let lower = suffix.to_ascii_lowercase();
    let scale: f64 = match lower.trim_end_matches('b') {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        "t" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(UnitError(format!(
                "invalid size \"{input}\": unknown unit \"{suffix}\" (use b, k, m, g or t)"
            )))
        }
    };
    if lower.len() > 2 || (lower.len() == 2 && !lower.ends_with('b')) {
        return Err(UnitError(format!("invalid size \"{input}\"")));
    }
    let bytes = value * scale;
    if bytes > u64::MAX as f64 {
        return Err(UnitError(format!("size \"{input}\" is too large")));
    }
    Ok(bytes as u64)
}

/// Formats a byte size the way Varnish prints parameter values: the largest
/// unit that divides it exactly.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "t"),
        (1 << 30, "g"),
        (1 << 20, "m"),
        (1 << 10, "k"),
    ];
    for (scale, unit) in UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}b")
}

/// Parses a boolean the way Varnish parameters accept it.
pub fn parse_bool(input: &str) -> Result<bool, UnitError> {
    match input.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "enable" | "1" => Ok(true),
        "off" | "false" | "no" | "disable" | "0" => Ok(false),
        _ => Err(UnitError(format!(
            "invalid boolean \"{input}\" (use on or off)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("120").unwrap(), 120.0);
        assert_eq!(parse_duration("10s").unwrap(), 10.0);
        assert_eq!(parse_duration("1.5m").unwrap(), 90.0);
        assert_eq!(parse_duration("2h").unwrap(), 7200.0);
        assert_eq!(parse_duration("1d").unwrap(), 86400.0);
        assert_eq!(parse_duration("1w").unwrap(), 604800.0);
        assert_eq!(parse_duration("1y").unwrap(), 31536000.0);
        assert_eq!(parse_duration("250ms").unwrap(), 0.25);
        assert!(parse_duration("10q").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("abc").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("256m").unwrap(), 256 << 20);
        assert_eq!(parse_bytes("8k").unwrap(), 8192);
        assert_eq!(parse_bytes("8KB").unwrap(), 8192);
        assert_eq!(parse_bytes("1g").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("40b").unwrap(), 40);
        assert_eq!(parse_bytes("1234").unwrap(), 1234);
        assert!(parse_bytes("12q").is_err());
        assert!(parse_bytes("-1k").is_err());
        assert!(parse_bytes("1kk").is_err());
        assert_eq!(format_bytes(8192), "8k");
        assert_eq!(format_bytes(256 << 20), "256m");
        assert_eq!(format_bytes(1000), "1000b");
    }

    #[test]
    fn booleans() {
        assert!(parse_bool("on").unwrap());
        assert!(!parse_bool("off").unwrap());
        assert!(parse_bool("maybe").is_err());
    }
}
