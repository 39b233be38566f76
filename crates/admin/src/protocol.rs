//! Tokens and framing: how a command line becomes arguments, and how a
//! response travels back.

/// The length of a response's first line, newline included.
pub const STATUS_LINE_LEN: usize = 13;

/// Frames one response: `"%-3u %-8u\n"`, the body, and a newline.
pub fn frame(status: u16, body: &str) -> Vec<u8> {
    let mut out = format!("{status:<3} {:<8}\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out.push(b'\n');
    out
}

/// Reads a status line back: the status and the body length.
pub fn parse_status_line(line: &[u8]) -> Option<(u16, usize)> {
    if line.len() != STATUS_LINE_LEN || line[STATUS_LINE_LEN - 1] != b'\n' {
        return None;
    }
    let text = std::str::from_utf8(&line[..STATUS_LINE_LEN - 1]).ok()?;
    let status = text.get(..3)?.trim().parse().ok()?;
    let len = text.get(4..)?.trim().parse().ok()?;
    Some((status, len))
}

/// Splits a command line into arguments: blanks separate them, double
/// quotes group them, and inside quotes `\n \r \t \" \\`, octal `\nnn` and
/// hexadecimal `\xnn` escapes are decoded.
pub fn tokenize(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Ok(out);
        };
        let mut token = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("Missing '\"'".to_string()),
                    Some('"') => break,
                    Some('\\') => token.push(unescape(&mut chars)?),
                    Some(c) => token.push(c),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_ascii_whitespace()) {
                return Err("Missing blank after '\"'".to_string());
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_ascii_whitespace() {
                    break;
                }
                token.push(c);
                chars.next();
            }
        }
        out.push(token);
    }
}

fn unescape(chars: &mut std::iter::Peekable<std::str::Chars>) -> Result<char, String> {
    let digits = |chars: &mut std::iter::Peekable<std::str::Chars>, radix: u32, max: usize| {
        let mut value = 0u32;
        let mut n = 0;
        while n < max {
            match chars.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    value = value * radix + d;
                    chars.next();
                    n += 1;
                }
                None => break,
            }
        }
        (value, n)
    };
    match chars.next() {
        Some('n') => Ok('\n'),
        Some('r') => Ok('\r'),
        Some('t') => Ok('\t'),
        Some('"') => Ok('"'),
        Some('\\') => Ok('\\'),
        Some('x') => match digits(chars, 16, 2) {
            (v, 2) => Ok(char::from(v as u8)),
            _ => Err("Invalid \\x escape".to_string()),
        },
        Some(c @ '0'..='7') => {
            let (rest, n) = digits(chars, 8, 2);
            let v = c.to_digit(8).unwrap_or(0) * 8u32.pow(n as u32) + rest;
            u8::try_from(v)
                .map(char::from)
                .map_err(|_| "Invalid octal escape".to_string())
        }
        _ => Err("Invalid backslash sequence".to_string()),
    }
}

/// What the reader made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// A whole command, with a here document folded into its last argument.
    Command(Vec<String>),
    /// A line that could not be split into tokens.
    Syntax(String),
}

/// Collects command lines from a byte stream. A line whose last two
/// tokens are `<<` and a word continues with the lines up to one that is
/// exactly that word; they become the last argument, each with its
/// newline. Empty lines are skipped, as varnishd skips them.
#[derive(Default)]
pub struct CommandReader {
    buf: Vec<u8>,
}

impl CommandReader {
    pub fn new() -> CommandReader {
        CommandReader::default()
    }

    /// Adds bytes received.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that are not yet a whole command.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole command, if the buffer holds one.
    pub fn next_input(&mut self) -> Option<Input> {
        loop {
            let end = self.buf.iter().position(|&b| b == b'\n')?;
            let line = String::from_utf8_lossy(&self.buf[..end])
                .trim_end_matches('\r')
                .to_string();
            let mut tokens = match tokenize(&line) {
                Ok(t) => t,
                Err(e) => {
                    self.buf.drain(..=end);
                    return Some(Input::Syntax(e));
                }
            };
            if tokens.is_empty() {
                self.buf.drain(..=end);
                continue;
            }
            let n = tokens.len();
            if n >= 3 && tokens[n - 2] == "<<" {
                let word = tokens[n - 1].clone();
                let (doc, used) = self.here_document(end + 1, &word)?;
                self.buf.drain(..used);
                tokens.truncate(n - 2);
                tokens.push(doc);
            } else {
                self.buf.drain(..=end);
            }
            return Some(Input::Command(tokens));
        }
    }

    /// The here document starting at `start`, and where it ends, or
    /// `None` while its closing word has not arrived.
    fn here_document(&self, start: usize, word: &str) -> Option<(String, usize)> {
        let mut pos = start;
        let mut doc = String::new();
        loop {
            let rel = self.buf[pos..].iter().position(|&b| b == b'\n')?;
            let line = String::from_utf8_lossy(&self.buf[pos..pos + rel]);
            let line = line.trim_end_matches('\r');
            pos += rel + 1;
            if line == word {
                return Some((doc, pos));
            }
            doc.push_str(line);
            doc.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_has_a_fixed_status_line() {
        let f = frame(200, "PONG 1 1.0");
        assert_eq!(&f[..STATUS_LINE_LEN], b"200 10      \n");
        assert_eq!(&f[STATUS_LINE_LEN..], b"PONG 1 1.0\n");
        assert_eq!(parse_status_line(&f[..STATUS_LINE_LEN]), Some((200, 10)));
        assert_eq!(parse_status_line(b"200 10\n"), None);
        assert_eq!(parse_status_line(b"abc 10      \n"), None);
    }

    #[test]
    fn tokens_quotes_and_escapes() {
        assert_eq!(tokenize("  help   banner ").unwrap(), ["help", "banner"]);
        assert_eq!(
            tokenize(r#"param.set cc "a b\tc\\\"" x"#).unwrap(),
            ["param.set", "cc", "a b\tc\\\"", "x"]
        );
        assert_eq!(tokenize(r#""\101\x42""#).unwrap(), ["AB"]);
        assert_eq!(tokenize(r#""""#).unwrap(), [""]);
        assert_eq!(tokenize("ping \"abc").unwrap_err(), "Missing '\"'");
        assert!(tokenize(r#""a\q""#).is_err());
        assert!(tokenize(r#""a"b"#).is_err());
    }

    #[test]
    fn commands_arrive_in_pieces_and_here_documents_fold() {
        let mut r = CommandReader::new();
        r.push(b"\n\nping");
        assert_eq!(r.next_input(), None);
        r.push(b"\nvcl.inline t << EOF\nvcl 4.1;\n");
        assert_eq!(r.next_input(), Some(Input::Command(vec!["ping".into()])));
        assert_eq!(r.next_input(), None);
        r.push(b"backend b none;\nEOF\nstatus\n");
        assert_eq!(
            r.next_input(),
            Some(Input::Command(vec![
                "vcl.inline".into(),
                "t".into(),
                "vcl 4.1;\nbackend b none;\n".into()
            ]))
        );
        assert_eq!(r.next_input(), Some(Input::Command(vec!["status".into()])));
        assert_eq!(r.pending(), 0);
        r.push(b"ping \"x\n");
        assert!(matches!(r.next_input(), Some(Input::Syntax(_))));
    }

    #[test]
    fn only_the_last_here_document_counts() {
        let mut r = CommandReader::new();
        r.push(b"cmd arg << EOF1 << EOF2\nheredoc1\nEOF1\nheredoc2\nEOF2\n");
        assert_eq!(
            r.next_input(),
            Some(Input::Command(vec![
                "cmd".into(),
                "arg".into(),
                "<<".into(),
                "EOF1".into(),
                "heredoc1\nEOF1\nheredoc2\n".into()
            ]))
        );
    }
}
