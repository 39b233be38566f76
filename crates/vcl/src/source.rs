//! Source files of a VCL program, byte spans into them, and compile errors
//! rendered the way Varnish users know: the message, the file, line and
//! column, the offending line, and a marker under the token.

use std::fmt;

/// One loaded file (or inline text).
#[derive(Debug, Clone)]
pub struct Source {
    /// The name errors use: a path, or `<vcl.inline>`, `<builtin>`.
    pub name: String,
    pub text: String,
}

/// A byte range in one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: usize, start: usize, end: usize) -> Span {
        Span {
            file: file as u32,
            start: start as u32,
            end: end as u32,
        }
    }

    /// The span from the start of `self` to the end of `other`.
    pub fn to(self, other: Span) -> Span {
        if other.file != self.file || other.end < self.start {
            return self;
        }
        Span {
            end: other.end,
            ..self
        }
    }
}

/// A compile error: what went wrong and where.
#[derive(Debug, Clone)]
pub struct CompileError {
    pub message: String,
    pub span: Option<Span>,
    /// Further context lines ("(in sub vcl_recv)", "defined here").
    pub notes: Vec<(String, Option<Span>)>,
}

impl CompileError {
    pub fn new(message: impl Into<String>, span: Span) -> CompileError {
        CompileError {
            message: message.into(),
            span: Some(span),
            notes: Vec::new(),
        }
    }

    pub fn general(message: impl Into<String>) -> CompileError {
        CompileError {
            message: message.into(),
            span: None,
            notes: Vec::new(),
        }
    }

    pub fn note(mut self, text: impl Into<String>, span: Option<Span>) -> CompileError {
        self.notes.push((text.into(), span));
        self
    }

    /// The error with its position and source excerpt, ready to print.
    pub fn render(&self, sources: &[Source]) -> String {
        let mut out = String::new();
        match self.span.and_then(|s| locate(sources, s)) {
            Some(loc) => {
                out.push_str(&format!(
                    "{}:{}:{}: {}\n",
                    loc.name, loc.line, loc.column, self.message
                ));
                excerpt(&mut out, &loc);
            }
            None => {
                out.push_str(&self.message);
                out.push('\n');
            }
        }
        for (text, span) in &self.notes {
            match span.and_then(|s| locate(sources, s)) {
                Some(loc) => {
                    out.push_str(&format!(
                        "{}:{}:{}: {}\n",
                        loc.name, loc.line, loc.column, text
                    ));
                    excerpt(&mut out, &loc);
                }
                None => {
                    out.push_str(text);
                    out.push('\n');
                }
            }
        }
        out
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A span resolved to a line and column (both from 1).
pub struct Location<'a> {
    pub name: &'a str,
    pub line: usize,
    pub column: usize,
    pub line_text: &'a str,
    /// Width of the marked token on this line, at least 1.
    pub width: usize,
}

/// Resolves a span to its line and column.
pub fn locate(sources: &[Source], span: Span) -> Option<Location<'_>> {
    let src = sources.get(span.file as usize)?;
    let start = (span.start as usize).min(src.text.len());
    let line_start = src.text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = src.text[start..]
        .find('\n')
        .map_or(src.text.len(), |i| start + i);
    let line = src.text[..start].matches('\n').count() + 1;
    let column = src.text[line_start..start].chars().count() + 1;
    let end = (span.end as usize).clamp(start, line_end);
    Some(Location {
        name: &src.name,
        line,
        column,
        line_text: &src.text[line_start..line_end],
        width: src.text[start..end].chars().count().max(1),
    })
}

/// The offending line with `#` under the token and `-` elsewhere, as
/// Varnish's compiler marks it.
fn excerpt(out: &mut String, loc: &Location<'_>) {
    let line = loc.line_text.replace('\t', " ");
    out.push_str(&line);
    out.push('\n');
    let len = line.chars().count().max(loc.column - 1 + loc.width);
    for i in 0..len {
        let marked = i + 1 >= loc.column && i + 1 < loc.column + loc.width;
        out.push(if marked { '#' } else { '-' });
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_position_and_marker() {
        let sources = vec![Source {
            name: "test.vcl".into(),
            text: "vcl 4.1;\nsub vcl_recv {\n\tset req.foo = 1;\n}\n".into(),
        }];
        let at = sources[0].text.find("req.foo").unwrap();
        let e = CompileError::new("Unknown variable 'req.foo'", Span::new(0, at, at + 7));
        let text = e.render(&sources);
        assert_eq!(
            text,
            "test.vcl:3:6: Unknown variable 'req.foo'\n set req.foo = 1;\n-----#######-----\n"
        );
    }
}
