//! The VTC language's surface (vtc(7)): one command a line, words split
//! on white space, `"..."` strings with backslash escapes, `{...}` blocks
//! that nest and may span lines, `\` at the end of a line to continue it,
//! and `#` comments. Words and strings have their macros expanded when
//! their command runs (`Command::expand`), so that a command can use what
//! an earlier one defined; blocks are kept as written, for the command
//! that owns them.

use crate::macros::Macros;
use crate::trace::{Fail, Step};

/// One word of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// Written as a `{...}` block (not macro-expanded).
    pub block: bool,
}

/// One command: its words and the line it starts on.
#[derive(Debug, Clone)]
pub struct Command {
    pub words: Vec<Word>,
    pub line: usize,
}

impl Command {
    /// The command with the macros of its words and strings replaced.
    pub fn expand(&self, macros: &Macros) -> Step<Command> {
        self.expand_with(macros, false)
    }

    /// The command with the macros of its words, strings and, when
    /// `blocks`, its `{...}` blocks replaced (inside a server or client,
    /// a block is a body or a header value, as in varnishtest).
    pub fn expand_with(&self, macros: &Macros, blocks: bool) -> Step<Command> {
        let words = self
            .words
            .iter()
            .map(|w| {
                Ok(Word {
                    text: if w.block && !blocks {
                        w.text.clone()
                    } else {
                        macros.expand(&w.text)?
                    },
                    block: w.block,
                })
            })
            .collect::<Step<Vec<Word>>>()?;
        Ok(Command {
            words,
            line: self.line,
        })
    }
}

/// Splits a script into commands.
pub fn parse(src: &str) -> Step<Vec<Command>> {
    let b = src.as_bytes();
    let mut commands = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut line = 1;
    let mut start_line = 1;
    let mut i = 0;
    let end_command = |words: &mut Vec<Word>, commands: &mut Vec<Command>, at: usize| {
        if !words.is_empty() {
            commands.push(Command {
                words: std::mem::take(words),
                line: at,
            });
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                end_command(&mut words, &mut commands, start_line);
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                line += 1;
                i += 2;
            }
            b'\\' if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') => {
                line += 1;
                i += 3;
            }
            b'#' if words.is_empty() || b[i - 1].is_ascii_whitespace() => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            _ => {
                if words.is_empty() {
                    start_line = line;
                }
                let (word, next, lines) = read_word(b, i, line)?;
                line += lines;
                i = next;
                words.push(word);
            }
        }
    }
    end_command(&mut words, &mut commands, start_line);
    Ok(commands)
}

/// Reads one word at `i`: returns it, where it ends and how many line
/// breaks it spanned.
fn read_word(b: &[u8], mut i: usize, line: usize) -> Step<(Word, usize, usize)> {
    match b[i] {
        b'{' => {
            let open = i;
            let mut depth = 0;
            let mut lines = 0;
            while i < b.len() {
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            let text = String::from_utf8_lossy(&b[open + 1..i]).into_owned();
                            return Ok((Word { text, block: true }, i + 1, lines));
                        }
                    }
                    b'\n' => lines += 1,
                    _ => {}
                }
                i += 1;
            }
            Err(Fail(format!("line {line}: unbalanced {{")))
        }
        b'"' => {
            i += 1;
            let mut out = Vec::new();
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        let text = String::from_utf8_lossy(&out).into_owned();
                        return Ok((Word { text, block: false }, i + 1, 0));
                    }
                    b'\n' => break,
                    b'\\' if i + 1 < b.len() => {
                        i = escape(b, i + 1, &mut out);
                    }
                    other => out.push(other),
                }
                i += 1;
            }
            Err(Fail(format!("line {line}: unterminated \"string\"")))
        }
        _ => {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            let text = String::from_utf8_lossy(&b[start..i]).into_owned();
            Ok((Word { text, block: false }, i, 0))
        }
    }
}

/// Reads the escape after a backslash at `b[i]` onto `out` (`\n`, `\r`,
/// `\t`, up to three octal digits, or the character itself); returns
/// the index of its last byte.
fn escape(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> usize {
    match b[i] {
        b'n' => out.push(b'\n'),
        b'r' => out.push(b'\r'),
        b't' => out.push(b'\t'),
        b'0'..=b'7' => {
            let mut v = 0u32;
            let mut n = 0;
            while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                v = v * 8 + u32::from(b[i] - b'0');
                i += 1;
                n += 1;
            }
            i -= 1;
            out.push(v as u8);
        }
        other => out.push(other),
    }
    i
}

/// A text with its backslash escapes read, as in a quoted string.
pub(crate) fn unescape(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i = escape(b, i + 1, &mut out);
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<Vec<String>> {
        let m = Macros::new();
        m.define("x", "42");
        parse(src)
            .unwrap()
            .into_iter()
            .map(|c| {
                c.expand(&m)
                    .unwrap()
                    .words
                    .into_iter()
                    .map(|w| w.text)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn words_strings_blocks_comments_and_continuations() {
        let src = "varnishtest \"a \\\"b\\\"\\n\"  # note\n\
                   # whole line\n\
                   server s1 {\n  rxreq\n  { nested }\n} -start\n\
                   expect ${x} == \\\n  \"${x}\"\n";
        assert_eq!(
            words(src),
            vec![
                vec!["varnishtest", "a \"b\"\n"],
                vec!["server", "s1", "\n  rxreq\n  { nested }\n", "-start"],
                vec!["expect", "42", "==", "42"],
            ]
        );
    }

    #[test]
    fn blocks_keep_their_macros_and_lines_are_counted() {
        let m = Macros::new();
        let cmds = parse("a\n\nb {\n${y}\n}\nc").unwrap();
        assert_eq!(cmds[1].expand(&m).unwrap().words[1].text, "\n${y}\n");
        assert!(cmds[1].words[1].block);
        // Inside a session, a block (a body) is expanded like a string.
        m.define("y", "why");
        let inner = cmds[1].expand_with(&m, true).unwrap();
        assert_eq!(inner.words[1].text, "\nwhy\n");
        assert!(inner.words[1].block);
        assert_eq!(
            cmds.iter().map(|c| c.line).collect::<Vec<_>>(),
            vec![1, 3, 6]
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let m = Macros::new();
        assert!(parse("a {").unwrap_err().0.contains("unbalanced"));
        assert!(parse("a \"b").unwrap_err().0.contains("unterminated"));
        let later = parse("a ${nope}").unwrap();
        assert!(later[0].expand(&m).unwrap_err().0.contains("nope"));
    }
}
