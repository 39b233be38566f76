//! The VCL lexer: identifiers (which may hold `.` and `-`, as in
//! `req.http.X-Forwarded-For`), numbers, the three string forms (`"…"`,
//! `{"…"}`, `"""…"""`), operators, and the three comment styles.

use crate::source::{CompileError, Span};

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    Str(String),
    /// A number as written; `int` when it has no fraction.
    Num {
        value: f64,
        int: bool,
    },
    Op(&'static str),
    /// A BLOB literal, `:base64:`, decoded.
    Blob(Vec<u8>),
    Eof,
}

/// Decodes standard base64 (with or without padding); None if any
/// character is not of the alphabet.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    crate::base64::decode(text, crate::base64::STD, Some(b'='))
}

/// A token and where it is.
#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Operators, longest first so that `==` wins over `=`.
const OPS: &[&str] = &[
    "==", "!=", "<=", ">=", "&&", "||", "!~", "+=", "-=", "*=", "/=", "<", ">", "=", "!", "~", "+",
    "-", "*", "/", "%", "(", ")", "{", "}", ";", ",", ".",
];

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
}

/// Splits one source file into tokens, ending with `Eof`.
pub fn lex(text: &str, file: usize) -> Result<Vec<Token>, CompileError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let span = |s: usize, e: usize| Span::new(file, s, e);
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let Some(end) = text[i + 2..].find("*/") else {
                return Err(CompileError::new(
                    "Unterminated /* ... */ comment",
                    span(i, i + 2),
                ));
            };
            i += 2 + end + 2;
            continue;
        }
        if c == b'C' && b.get(i + 1) == Some(&b'{') {
            return Err(CompileError::new(
                "Inline C is not supported: Lacquer compiles VCL without a C compiler",
                span(i, i + 2),
            ));
        }
        if let Some((token, next)) = string_at(text, i, file)? {
            out.push(token);
            i = next;
            continue;
        }
        if c.is_ascii_digit() {
            let (token, next) = number_at(text, i, file);
            out.push(token);
            i = next;
            continue;
        }
        if is_ident_start(c) {
            let mut j = i + 1;
            while j < b.len() && is_ident_char(b[j]) {
                j += 1;
            }
            // A trailing dot belongs to what follows, not to the name.
            while j > i + 1 && b[j - 1] == b'.' {
                j -= 1;
            }
            out.push(Token {
                tok: Tok::Ident(text[i..j].to_string()),
                span: span(i, j),
            });
            i = j;
            continue;
        }
        if c == b':' {
            // A BLOB literal: base64 between colons.
            let end = b[i + 1..]
                .iter()
                .position(|&x| x == b':')
                .map(|e| i + 1 + e);
            if let Some(decoded) = end.and_then(|e| base64_decode(&b[i + 1..e])) {
                let e = end.unwrap_or(i);
                out.push(Token {
                    tok: Tok::Blob(decoded),
                    span: span(i, e + 1),
                });
                i = e + 1;
                continue;
            }
        }
        match OPS.iter().find(|op| text[i..].starts_with(**op)) {
            Some(op) => {
                out.push(Token {
                    tok: Tok::Op(op),
                    span: span(i, i + op.len()),
                });
                i += op.len();
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(CompileError::new(
                    format!("Syntax error: unexpected character '{ch}'"),
                    span(i, i + ch.len_utf8()),
                ));
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: span(b.len(), b.len()),
    });
    Ok(out)
}

/// A string literal at `i` (`"…"`, `{"…"}` or `"""…"""`), with where
/// the text after it starts; None where none starts there.
fn string_at(text: &str, i: usize, file: usize) -> Result<Option<(Token, usize)>, CompileError> {
    let b = text.as_bytes();
    let c = b[i];
    let span = |s: usize, e: usize| Span::new(file, s, e);
    if c == b'{' && b.get(i + 1) == Some(&b'"') {
        let Some(end) = text[i + 2..].find("\"}") else {
            return Err(CompileError::new(
                "Unterminated long string {\" ... \"}",
                span(i, i + 2),
            ));
        };
        let s = &text[i + 2..i + 2 + end];
        return Ok(Some((
            Token {
                tok: Tok::Str(s.to_string()),
                span: span(i, i + 4 + end),
            },
            i + 4 + end,
        )));
    }
    if text[i..].starts_with("\"\"\"") {
        let Some(end) = text[i + 3..].find("\"\"\"") else {
            return Err(CompileError::new(
                "Unterminated string \"\"\" ... \"\"\"",
                span(i, i + 3),
            ));
        };
        let s = &text[i + 3..i + 3 + end];
        return Ok(Some((
            Token {
                tok: Tok::Str(s.to_string()),
                span: span(i, i + 6 + end),
            },
            i + 6 + end,
        )));
    }
    if c == b'"' {
        let mut j = i + 1;
        while j < b.len() && b[j] != b'"' && b[j] != b'\n' {
            j += 1;
        }
        if j >= b.len() || b[j] != b'"' {
            return Err(CompileError::new(
                "Unterminated string (a \"...\" string ends on its line; use {\"...\"} for several lines)",
                span(i, j),
            ));
        }
        return Ok(Some((
            Token {
                tok: Tok::Str(text[i + 1..j].to_string()),
                span: span(i, j + 1),
            },
            j + 1,
        )));
    }
    Ok(None)
}

/// The number at `i` (whole, or with a fraction), with where the text
/// after it starts.
fn number_at(text: &str, i: usize, file: usize) -> (Token, usize) {
    let b = text.as_bytes();
    let mut j = i;
    while j < b.len() && b[j].is_ascii_digit() {
        j += 1;
    }
    let mut int = true;
    if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
        int = false;
        j += 1;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
    }
    let value: f64 = text[i..j].parse().unwrap_or(f64::INFINITY);
    (
        Token {
            tok: Tok::Num { value, int },
            span: Span::new(file, i, j),
        },
        j,
    )
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Num { value, .. } => format!("'{value}'"),
            Tok::Op(op) => format!("'{op}'"),
            Tok::Blob(_) => "a BLOB literal".to_string(),
            Tok::Eof => "end of file".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_literals_are_base64_between_colons() {
        assert_eq!(base64_decode(b"aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(base64_decode(b"aGVsbG8"), Some(b"hello".to_vec()));
        assert_eq!(base64_decode(b""), Some(Vec::new()));
        assert_eq!(base64_decode(b"a=b="), None);
        assert_eq!(base64_decode(b"a"), None);
        assert_eq!(base64_decode(b"a*bc"), None);
        let toks = lex(".preamble = :aGk=: ;", 0).unwrap();
        assert!(toks.iter().any(|t| t.tok == Tok::Blob(b"hi".to_vec())));
        assert!(lex("x = :not base64:", 0).is_err());
    }

    fn toks(s: &str) -> Vec<Tok> {
        lex(s, 0).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn identifiers_strings_numbers_comments() {
        assert_eq!(
            toks("set req.http.X-Foo = {\"a\nb\"}; # c\n// d\n/* e */ 1.5m"),
            vec![
                Tok::Ident("set".into()),
                Tok::Ident("req.http.X-Foo".into()),
                Tok::Op("="),
                Tok::Str("a\nb".into()),
                Tok::Op(";"),
                Tok::Num {
                    value: 1.5,
                    int: false
                },
                Tok::Ident("m".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("a!~\"x\"==.host"),
            vec![
                Tok::Ident("a".into()),
                Tok::Op("!~"),
                Tok::Str("x".into()),
                Tok::Op("=="),
                Tok::Op("."),
                Tok::Ident("host".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("\"\"\"q\"x\"\"\""),
            vec![Tok::Str("q\"x".into()), Tok::Eof]
        );
    }

    #[test]
    fn errors_name_the_position() {
        let e = lex("sub x {\n \"abc\n}", 0).unwrap_err();
        assert!(e.message.contains("Unterminated string"));
        assert_eq!(e.span.unwrap().start, 9);
        assert!(lex("C{ int x; }C", 0).is_err());
        assert!(lex("/* open", 0).is_err());
        assert!(lex("a @ b", 0).is_err());
    }
}
