//! Regular expressions as every part of Lacquer compiles them (VCL, bans).
//! A pattern the linear-time engines can run runs there, over bytes:
//! matching is the `regex` crate's, and finding the spans of every match
//! (`regsuball`) goes through a lazy DFA of the same pattern, which on the
//! short, alternation-rich patterns of VCL is markedly cheaper than the
//! general engine's search strategies, and no dearer than a DFA built
//! whole (the typical cookie `regsuball`: 205 ns lazy, 255 ns whole, 337 ns
//! general). The lazy DFA is made only for a pattern whose spans are
//! asked for, so that a condition's or a ban's pattern holds none. A pattern with look-around or
//! backreferences (as PCRE writes them) runs on a backtracking engine
//! (`fancy-regex`) whose work per match is bounded, as PCRE's is by
//! `pcre2_match_limit`: past the bound the match fails, and the caller
//! says so in the log. A hostile subject cannot hang a worker either way.

use regex_automata::hybrid::regex::{Cache, Regex as LazyRegex};
use regex_automata::util::iter::Searcher;
use regex_automata::util::pool::Pool;
use regex_automata::{nfa::thompson, util::syntax, Input};
use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The limit on the compiled size of one pattern.
const SIZE_LIMIT: usize = 1 << 22;

/// The backtracking steps one match of a backtracking pattern may take,
/// for patterns compiled from now on (`pcre2_match_limit`).
static MATCH_LIMIT: AtomicUsize = AtomicUsize::new(10_000);

/// Sets the bound on a backtracking match's work for patterns compiled
/// from now on (a program loaded later, a new ban).
pub fn set_match_limit(limit: usize) {
    MATCH_LIMIT.store(limit.max(1), Ordering::Relaxed);
}

/// A backtracking match went past `pcre2_match_limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitExceeded;

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Regexp matching returned -47 (match limit exceeded)")
    }
}

type CacheFn = Box<dyn Fn() -> Cache + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// A compiled pattern.
pub struct Regex {
    pattern: String,
    engine: Engine,
}

enum Engine {
    Linear {
        /// For a pattern that is one class of ASCII bytes and nothing else
        /// (the built-in VCL's `req.http.host ~ "[[:upper:]]"`): the
        /// class, so that a match is a scan of a table.
        class: Option<Box<[bool; 256]>>,
        meta: regex::bytes::Regex,
        /// The span finder, made when spans are first asked for (or
        /// prepared: see [`Regex::prepare_spans`]), so that a pattern only
        /// ever matched (a condition, a ban) holds no DFA; `None` for the
        /// rare pattern a DFA cannot run (Unicode word boundaries), which
        /// then searches with `meta`.
        spans: OnceLock<Option<Spans>>,
    },
    Backtracking(Box<fancy_regex::Regex>),
}

/// A pattern's lazy DFA for finding where its matches are, with a cache
/// of its states per searching thread.
struct Spans(Arc<LazyRegex>, Pool<Cache, CacheFn>);

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Regex").field(&self.pattern).finish()
    }
}

impl Clone for Regex {
    fn clone(&self) -> Regex {
        compile(&self.pattern).expect("a pattern that compiled once compiles again")
    }
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegexError {
    /// The pattern does not parse; the engine's one-line explanation.
    Syntax(String),
}

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegexError::Syntax(s) => f.write_str(s),
        }
    }
}

/// Whether a pattern needs the backtracking engine: look-around or a
/// backreference.
fn needs_backtracking(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    ["(?=", "(?!", "(?<=", "(?<!"]
        .iter()
        .any(|p| pattern.contains(p))
        || bytes
            .windows(2)
            .any(|w| w[0] == b'\\' && (w[1].is_ascii_digit() && w[1] != b'0' || w[1] == b'k'))
}

/// The bytes a pattern matches, when it is one class of ASCII
/// characters alone (no anchor, repetition or group around it); None
/// otherwise. Parsed as `regex::bytes` parses it, flags included.
fn byte_class(pattern: &str) -> Option<Box<[bool; 256]>> {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let ranges: Vec<(u32, u32)> = match hir.kind() {
        HirKind::Class(Class::Bytes(c)) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect(),
        _ => return None,
    };
    // Past ASCII a character is several bytes in UTF-8: left to the
    // general engine.
    if ranges.iter().any(|&(_, end)| end > 0x7f) {
        return None;
    }
    let mut table = Box::new([false; 256]);
    for (start, end) in ranges {
        for b in start..=end {
            table[b as usize] = true;
        }
    }
    Some(table)
}

/// Compiles a pattern.
pub fn compile(pattern: &str) -> Result<Regex, RegexError> {
    if needs_backtracking(pattern) {
        let re = fancy_regex::RegexBuilder::new(pattern)
            .backtrack_limit(MATCH_LIMIT.load(Ordering::Relaxed))
            .delegate_size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| RegexError::Syntax(e.to_string()))?;
        return Ok(Regex {
            pattern: pattern.to_string(),
            engine: Engine::Backtracking(Box::new(re)),
        });
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
    Ok(Regex {
        pattern: pattern.to_string(),
        engine: Engine::Linear {
            class: byte_class(pattern),
            meta,
            spans: OnceLock::new(),
        },
    })
}

/// The lazy DFA that finds a pattern's matches; none when it cannot run
/// the pattern. It speaks the language of `regex::bytes`: Unicode
/// classes, but matching any bytes and allowing empty matches between any
/// two bytes.
fn span_finder(pattern: &str) -> Option<Spans> {
    let lazy = LazyRegex::builder()
        .syntax(syntax::Config::new().utf8(false))
        .thompson(
            thompson::Config::new()
                .utf8(false)
                .nfa_size_limit(Some(SIZE_LIMIT)),
        )
        .build(pattern)
        .ok()?;
    let lazy = Arc::new(lazy);
    let for_caches = lazy.clone();
    let make: CacheFn = Box::new(move || for_caches.create_cache());
    Some(Spans(lazy, Pool::new(make)))
}

/// A subject as the backtracking engine reads it: text, with any bytes
/// that are not UTF-8 read as U+FFFD.
pub fn as_text(s: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(s)
}

impl Regex {
    /// Whether the pattern matches anywhere in `s` (a backtracking match
    /// past its bound counts as no match).
    #[inline]
    pub fn is_match(&self, s: &[u8]) -> bool {
        self.try_match(s).unwrap_or(false)
    }

    /// Whether the pattern matches anywhere in `s`, or that a
    /// backtracking match went past `pcre2_match_limit`.
    #[inline]
    pub fn try_match(&self, s: &[u8]) -> Result<bool, LimitExceeded> {
        match &self.engine {
            Engine::Linear {
                class: Some(class), ..
            } => Ok(s.iter().any(|&b| class[usize::from(b)])),
            Engine::Linear { meta, .. } => Ok(meta.is_match(s)),
            Engine::Backtracking(re) => re.is_match(&as_text(s)).map_err(|_| LimitExceeded),
        }
    }

    /// Makes the DFAs [`Regex::try_spans`] searches with now, rather than
    /// at its first search: for a pattern whose matches will be replaced
    /// (`regsub`), compiled with its program.
    pub fn prepare_spans(&self) {
        if let Engine::Linear { spans, .. } = &self.engine {
            spans.get_or_init(|| span_finder(&self.pattern));
        }
    }

    /// The linear engine, for capture groups; None for a backtracking
    /// pattern (see [`Regex::backtracking`]).
    pub fn meta(&self) -> Option<&regex::bytes::Regex> {
        match &self.engine {
            Engine::Linear { meta, .. } => Some(meta),
            Engine::Backtracking(_) => None,
        }
    }

    /// The backtracking engine of a pattern that needs it.
    pub fn backtracking(&self) -> Option<&fancy_regex::Regex> {
        match &self.engine {
            Engine::Backtracking(re) => Some(re),
            Engine::Linear { .. } => None,
        }
    }

    /// Calls `f(start, end)` for the leftmost-first, non-overlapping
    /// matches in `s` (only the first unless `all`), as `find_iter` does.
    /// Returns false, having called `f` for some matches perhaps, when the
    /// lazy DFA gave up: the caller starts again with [`Regex::meta`].
    pub fn try_spans(&self, s: &[u8], all: bool, mut f: impl FnMut(usize, usize)) -> bool {
        let Engine::Linear { meta, spans, .. } = &self.engine else {
            return false;
        };
        let Some(Spans(lazy, pool)) = spans.get_or_init(|| span_finder(&self.pattern)) else {
            for m in meta.find_iter(s) {
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

    /// Whether a pattern has a span finder, made now.
    fn has_finder(re: &Regex) -> bool {
        re.prepare_spans();
        matches!(&re.engine, Engine::Linear { spans, .. } if matches!(spans.get(), Some(Some(_))))
    }

    fn spans(re: &Regex, s: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        assert!(re.try_spans(s, true, |a, b| out.push((a, b))));
        out
    }

    #[test]
    fn a_class_of_ascii_bytes_is_a_table_and_matches_as_the_engine_does() {
        let subjects: [&[u8]; 7] = [
            b"www.example.com",
            b"www.Example.com",
            b"",
            b"\xff\xfeZ",
            b"\xc3\x89t\xc3\xa9",
            b"x_9",
            b"\t",
        ];
        let patterns = [
            ("[[:upper:]]", true),
            ("[a-z0-9]", true),
            ("(?i)[a-c]", true),
            ("[^a-z]", false),
            (r"\d", false),
            (r"[\x00-\x1f]", true),
            ("\\w", false),
            ("[\u{e9}]", false),
            ("^[A-Z]", false),
            ("[A-Z]+", false),
            ("a", false),
        ];
        for (pattern, table) in patterns {
            let re = compile(pattern).unwrap();
            let Engine::Linear { class, meta, .. } = &re.engine else {
                panic!("{pattern} is linear");
            };
            assert_eq!(class.is_some(), table, "{pattern}");
            for s in subjects {
                assert_eq!(re.is_match(s), meta.is_match(s), "{pattern} on {s:?}");
            }
        }
    }

    #[test]
    fn linear_patterns_compile_and_others_are_named() {
        let re = compile("(?i)^/A[[:digit:]]+").unwrap();
        assert!(re.is_match(b"/a42"));
        // Matching alone (a condition, a ban) makes no span finder.
        assert!(matches!(&re.engine, Engine::Linear { spans, .. } if spans.get().is_none()));
        assert!(re.meta().is_some());
        match compile("(") {
            Err(RegexError::Syntax(s)) => assert!(s.contains("unclosed"), "{s}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn look_around_and_backreferences_backtrack_within_the_limit() {
        let re = compile("^/(?!static/)").unwrap();
        assert!(re.backtracking().is_some() && re.meta().is_none());
        assert!(re.is_match(b"/page"));
        assert!(!re.is_match(b"/static/x.css"));
        let re = compile("(?<=v=)[0-9]+").unwrap();
        assert_eq!(re.try_match(b"?v=42"), Ok(true));
        let re = compile(r"^(\w+)-\1$").unwrap();
        assert!(re.is_match(b"abc-abc"));
        assert!(!re.is_match(b"abc-abd"));
        // Bytes that are not UTF-8 are read as U+FFFD, not refused.
        assert!(compile("(?!x)\u{fffd}").unwrap().is_match(b"\xff"));
        // A pattern that backtracks exponentially fails at the bound
        // rather than hang the worker.
        let evil = compile("^(a|a)*(?=b)c").unwrap();
        let subject = vec![b'a'; 64];
        assert_eq!(evil.try_match(&subject), Err(LimitExceeded));
        assert!(!evil.is_match(&subject));
        assert!(compile("(?<=a+)b").is_err());
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
            assert!(has_finder(&re), "{pattern}");
            for s in subjects {
                let general: Vec<(usize, usize)> = re
                    .meta()
                    .unwrap()
                    .find_iter(s)
                    .map(|m| (m.start(), m.end()))
                    .collect();
                assert_eq!(spans(&re, s), general, "{pattern} on {s:?}");
            }
        }
        // Unicode word boundaries are beyond the lazy DFA: the general
        // engine finds them.
        let re = compile(r"\bx\b").unwrap();
        assert!(!has_finder(&re));
        assert_eq!(spans(&re, b"a x b"), vec![(2, 3)]);
        let mut first = Vec::new();
        re.try_spans(b"x x", false, |a, b| first.push((a, b)));
        assert_eq!(first, vec![(0, 1)]);
    }
}
