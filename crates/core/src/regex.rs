//! Regular expressions as every part of Lacquer compiles them (VCL, bans):
//! the `regex` crate's linear-time engine over bytes, with constructs it
//! cannot run in linear time refused by name rather than misread.

use std::fmt;

pub use regex::bytes::Regex;

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegexError {
    /// Look-around or a backreference: not runnable in linear time.
    NotLinear,
    /// The pattern does not parse; the engine's one-line explanation.
    Syntax(String),
}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegexError::NotLinear => f.write_str(
                "look-around and backreferences cannot run in linear time, which Lacquer guarantees for every regex",
            ),
            RegexError::Syntax(s) => f.write_str(s),
        }
    }
}

/// Compiles a pattern.
pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
    let bytes = pattern.as_bytes();
    let not_linear = ["(?=", "(?!", "(?<=", "(?<!"]
        .iter()
        .any(|p| pattern.contains(p))
        || bytes
            .windows(2)
            .any(|w| w[0] == b'\\' && w[1].is_ascii_digit() && w[1] != b'0');
    if not_linear {
        return Err(RegexError::NotLinear);
    }
    regex::bytes::RegexBuilder::new(pattern)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| {
            let detail = e.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or(detail.as_str());
            RegexError::Syntax(last.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_patterns_compile_and_others_are_named() {
        let re = compile("(?i)^/A[[:digit:]]+").unwrap();
        assert!(re.is_match(b"/a42"));
        assert_eq!(compile("(?<=a)b").unwrap_err(), RegexError::NotLinear);
        assert_eq!(compile("(a)\\1").unwrap_err(), RegexError::NotLinear);
        match compile("(") {
            Err(RegexError::Syntax(s)) => assert!(s.contains("unclosed"), "{s}"),
            other => panic!("{other:?}"),
        }
    }
}
