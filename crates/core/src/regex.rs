//! Regular expressions as every part of Lacquer compiles them (VCL, bans):
//! linear-time engines over bytes, with constructs they cannot run in
//! linear time refused by name rather than misread. Matching is the
//! `regex` crate's; finding the spans of every match (`regsuball`) goes
//! through a lazy DFA of the same pattern, which on the short,
//! alternation-rich patterns of VCL is markedly cheaper than the general
//! engine's search strategies.

use regex_automata::hybrid::regex::{Cache, Regex as LazyRegex};
use regex_automata::util::iter::Searcher;
use regex_automata::util::pool::Pool;
use regex_automata::{nfa::thompson, util::syntax, Input};
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;

/// The limit on the compiled size of one pattern.
const SIZE_LIMIT: usize = 1 << 22;

type CacheFn = Box<dyn Fn() -> Cache + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// A compiled pattern.
pub struct Regex {
    meta: regex::bytes::Regex,
    /// The span finder; `None` for the rare pattern a lazy DFA cannot run
    /// (Unicode word boundaries), which then searches with `meta`.
    spans: Option<(Arc<LazyRegex>, Pool<Cache, CacheFn>)>,
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Regex").field(&self.meta.as_str()).finish()
    }
}

impl Clone for Regex {
    fn clone(&self) -> Regex {
        compile(self.meta.as_str()).expect("a pattern that compiled once compiles again")
    }
}

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
    let meta = regex::bytes::RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let detail = e.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or(detail.as_str());
            RegexError::Syntax(last.to_string())
        })?;
    // The same language as `regex::bytes`: Unicode classes, but matching
    // any bytes and allowing empty matches between any two bytes.
    let spans = LazyRegex::builder()
        .syntax(syntax::Config::new().utf8(false))
        .thompson(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(SIZE_LIMIT)),
        )
        .build(pattern)
        .ok()
        .map(|lazy| {
            let lazy = Arc::new(lazy);
            let for_caches = lazy.clone();
            let make: CacheFn = Box::new(move || for_caches.create_cache());
            (lazy, Pool::new(make))
        });
    Ok(Regex { meta, spans })
}

impl Regex {
    /// Whether the pattern matches anywhere in `s`.
    #[inline]
    pub fn is_match(&self, s: &[u8]) -> bool {
        self.meta.is_match(s)
    }

    /// The general engine, for capture groups.
    pub fn meta(&self) -> &regex::bytes::Regex {
        &self.meta
    }

    /// Calls `f(start, end)` for the leftmost-first, non-overlapping
    /// matches in `s` (only the first unless `all`), as `find_iter` does.
    /// Returns false, having called `f` for some matches perhaps, when the
    /// lazy DFA gave up: the caller starts again with [`Regex::meta`].
    pub fn try_spans(&self, s: &[u8], all: bool, mut f: impl FnMut(usize, usize)) -> bool {
        let Some((lazy, pool)) = &self.spans else {
            for m in self.meta.find_iter(s) {
                f(m.start(), m.end());
                if !all {
                    break;
                }
            }
            return true;
        };
        let mut cache = pool.get();
        let mut searcher = Searcher::new(Input::new(s));
        loop {
            match searcher.try_advance(|input| lazy.try_search(&mut cache, input)) {
                Ok(Some(m)) => {
                    f(m.start(), m.end());
                    if !all {
                        return true;
                    }
                }
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(re: &Regex, s: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        assert!(re.try_spans(s, true, |a, b| out.push((a, b))));
        out
    }

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

    #[test]
    fn spans_are_the_general_engines() {
        let subjects: [&[u8]; 6] = [
            b"_ga=GA1.2.3; __utmz=1.2.3; _gid=GA1.9",
            b"a=1; _ga=2",
            b"",
            b"\xff\xfe caf\xc3\xa9 x",
            b"aaa",
            b";  ; ",
        ];
        for pattern in [
            r"(^|;\s*)(_ga|_gid|__utm[a-z]+)=[^;]*",
            "x*",
            "a|",
            r"^;\s*",
            "(?i)CAF\u{c9}",
            r"\w+",
            "",
        ] {
            let re = compile(pattern).unwrap();
            assert!(re.spans.is_some(), "{pattern}");
            for s in subjects {
                let general: Vec<(usize, usize)> =
                    re.meta.find_iter(s).map(|m| (m.start(), m.end())).collect();
                assert_eq!(spans(&re, s), general, "{pattern} on {s:?}");
            }
        }
        // Unicode word boundaries are beyond the lazy DFA: the general
        // engine finds them.
        let re = compile(r"\bx\b").unwrap();
        assert!(re.spans.is_none());
        assert_eq!(spans(&re, b"a x b"), vec![(2, 3)]);
        let mut first = Vec::new();
        re.try_spans(b"x x", false, |a, b| first.push((a, b)));
        assert_eq!(first, vec![(0, 1)]);
    }
}
