//! The commands of a client or server spec, run in order on one
//! connection: what to send, what to read, what to expect of it.

use crate::fail;
use crate::gzip;
use crate::http::{synth_body, Conn, Message};
use crate::net::Listener;
use crate::script::{self, Command, Word};
use crate::state::World;
use crate::trace::{log, Fail, Step};
use std::io::Read;
use std::time::Duration;

/// How one actor runs its spec.
pub struct Session<'w> {
    pub world: std::sync::Arc<World>,
    pub actor: String,
    /// The server's listening socket, for `accept` (not for `-dispatch`
    /// connections).
    pub listener: Option<&'w Listener>,
    /// A server's spec: `rxhdrs` and `rxbody` read requests.
    pub server: bool,
    /// Set by `non_fatal`: a failure ends this actor, not the test.
    pub non_fatal: bool,
    /// `-gziplevel`: the level of the bodies `-gzipbody`/`-gziplen` make.
    pub gzip_level: u32,
    /// `-gzipresidual`: where gzip bodies made from now on stop.
    pub gzip_residual: Option<u8>,
    /// A server's stop flag: a `delay` ends early once it is set (as
    /// varnishtest cancels a server at the end of a test).
    pub stopping: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// A command as the trace shows it before running it: its words, quoted
/// where they hold a space or nothing, a block as `{`.
pub(crate) fn echo(cmd: &Command) -> String {
    let line: Vec<String> = cmd
        .words
        .iter()
        .map(|w| {
            if w.block {
                "{".to_string()
            } else if w.text.contains(' ') || w.text.is_empty() {
                format!("\"{}\"", w.text)
            } else {
                w.text.clone()
            }
        })
        .collect();
    line.join(" ")
}

fn words(cmd: &Command) -> Vec<&str> {
    cmd.words.iter().map(|w| w.text.as_str()).collect()
}

impl Session<'_> {
    /// Runs a spec (the text of a `{...}` block).
    pub fn run_text(&mut self, conn: &mut Conn, text: &str) -> Step {
        let cmds = script::parse(text)?;
        let r = self.run_commands(conn, &cmds);
        // The streams end with the spec, as the connection's HTTP/2 does.
        crate::h2::stop(conn, r.is_err());
        r
    }

    pub fn run_commands(&mut self, conn: &mut Conn, cmds: &[Command]) -> Step {
        for cmd in cmds {
            // A loop's block holds commands, expanded as each runs.
            let blocks = cmd.words.first().is_none_or(|w| w.text != "loop");
            let cmd = &cmd.expand_with(&self.world.macros, blocks)?;
            log(2, &self.actor, &format!("=== {}", echo(cmd)));
            self.step(conn, cmd)?;
        }
        Ok(())
    }

    fn step(&mut self, conn: &mut Conn, cmd: &Command) -> Step {
        let w = words(cmd);
        let arg = |i: usize| -> Step<&str> {
            w.get(i)
                .copied()
                .ok_or_else(|| Fail(format!("{}: missing argument", w[0])))
        };
        if let Some(r) = crate::h2::command(self, conn, &w) {
            return r;
        }
        match w[0] {
            "txreq" => self.tx(conn, cmd, &w, true),
            "txresp" => self.tx(conn, cmd, &w, false),
            "rxreq" | "rxresp" | "rxhdrs" | "rxreqhdrs" | "rxresphdrs" | "rxbody" | "rxreqbody"
            | "rxrespbody" | "rxchunk" => receive(conn, &w, self.server),
            "chunked" | "chunkedlen" | "send" | "send_n" | "send_urgent" | "sendhex" => {
                send_command(conn, &w)
            }
            "recv" => {
                let n = parse_num(arg(1)?)? as usize;
                let data = conn.take(n)?;
                crate::trace::dump(&self.actor, "recv", &data);
                Ok(())
            }
            "timeout" => {
                let secs: f64 = arg(1)?
                    .parse()
                    .map_err(|_| Fail("timeout: bad number".into()))?;
                conn.timeout = Duration::from_secs_f64(secs.max(0.001));
                Ok(())
            }
            "expect" => expect(&self.actor, conn, &w),
            "expect_close" => conn.expect_close(),
            "expect_pattern" => {
                let body = &conn.resp.body;
                if *body != synth_body(body.len()) {
                    fail!("expect_pattern: the body is not the -bodylen pattern");
                }
                log(4, &self.actor, "EXPECT PATTERN SUCCESS");
                Ok(())
            }
            "delay" => match &self.stopping {
                Some(stopping) => delay_unless(&self.actor, arg(1)?, stopping),
                None => delay(&self.actor, arg(1)?),
            },
            "barrier" => self.world.barrier(arg(1)?)?.sync(&self.actor),
            "close" | "shutdown" | "accept" => self.connection_command(conn, &w),
            "loop" => {
                let n = parse_num(arg(1)?)?;
                let Some(Word { text, block: true }) = cmd.words.get(2) else {
                    fail!("loop: needs a {{...}} spec");
                };
                let cmds = script::parse(text)?;
                for i in 0..n {
                    log(3, &self.actor, &format!("Loop #{i}"));
                    self.run_commands(conn, &cmds)?;
                }
                Ok(())
            }
            "fatal" => {
                self.non_fatal = false;
                Ok(())
            }
            "non_fatal" => {
                self.non_fatal = true;
                Ok(())
            }
            "gunzip" => {
                let msg = if self.server {
                    &mut conn.req
                } else {
                    &mut conn.resp
                };
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&msg.body[..])
                    .read_to_end(&mut plain)
                    .map_err(|e| Fail(format!("Gunzip error = {e}")))?;
                log(3, &self.actor, &format!("new bodylen {}", plain.len()));
                msg.bodylen = Some(plain.len());
                msg.body = plain;
                Ok(())
            }
            other => fail!("Unknown command: \"{other}\""),
        }
    }

    /// `close`, `shutdown` and `accept`: the connection itself.
    fn connection_command(&mut self, conn: &mut Conn, w: &[&str]) -> Step {
        match w[0] {
            "close" => {
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                log(3, &self.actor, "closing fd");
                Ok(())
            }
            "shutdown" => {
                // As varnishtest: both directions unless -read or -write.
                let how = match (w.contains(&"-read"), w.contains(&"-write")) {
                    (true, false) => std::net::Shutdown::Read,
                    (false, true) => std::net::Shutdown::Write,
                    _ => std::net::Shutdown::Both,
                };
                let _ = conn.stream.shutdown(how);
                log(3, &self.actor, "Shutting down fd");
                Ok(())
            }
            "accept" => {
                let Some(l) = self.listener else {
                    fail!("accept: only a server can accept");
                };
                // The current connection closes first, as in varnishtest:
                // the peer sees it go before the next one is taken.
                crate::h2::stop(conn, false);
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                let (stream, peer) = l
                    .accept()
                    .map_err(|e| Fail(format!("Accept failed: {e}")))?;
                log(3, &self.actor, &format!("Accepted socket fd from {peer}"));
                *conn = Conn::new(&self.actor, stream, conn.timeout);
                Ok(())
            }
            _ => unreachable!("connection_command: {}", w[0]),
        }
    }

    /// `txreq` and `txresp`.
    fn tx(&mut self, conn: &mut Conn, cmd: &Command, w: &[&str], request: bool) -> Step {
        let (mut a, mut b, mut c) = if request {
            ("GET".to_string(), "/".to_string(), "HTTP/1.1".to_string())
        } else {
            ("HTTP/1.1".to_string(), "200".to_string(), "OK".to_string())
        };
        let mut headers: Vec<String> = Vec::new();
        let (mut nohost, mut nolen, mut chunked) = (false, false, false);
        let mut body: Option<Vec<u8>> = if request { None } else { Some(Vec::new()) };
        let mut i = 1;
        let value = |i: &mut usize| -> Step<String> {
            *i += 1;
            w.get(*i)
                .map(|s| s.to_string())
                .ok_or_else(|| Fail(format!("{}: {} needs a value", w[0], w[*i - 1])))
        };
        // As varnishtest: the request-line and status-line options come
        // before the header and body ones.
        let mut line_done = false;
        while i < w.len() {
            let line_option = matches!(
                w[i],
                "-url" | "-method" | "-req" | "-proto" | "-status" | "-reason" | "-msg"
            );
            if line_option && line_done {
                fail!("Unknown http {} spec: {}", w[0], w[i]);
            }
            line_done |= !line_option;
            match (w[i], request) {
                ("-url", true) => b = value(&mut i)?,
                ("-method" | "-req", true) => a = value(&mut i)?,
                ("-proto", true) => c = value(&mut i)?,
                ("-proto", false) => a = value(&mut i)?,
                ("-status", false) => b = value(&mut i)?,
                ("-reason" | "-msg", false) => c = value(&mut i)?,
                ("-nohost", true) => nohost = true,
                ("-nodate" | "-noserver" | "-nouseragent", _) => {}
                ("-hdr", _) => headers.push(value(&mut i)?),
                ("-hdrlen", _) => {
                    let name = value(&mut i)?;
                    let n = parse_num(&value(&mut i)?)? as usize;
                    headers.push(format!("{name}: {}", "x".repeat(n)));
                }
                ("-nolen", _) => nolen = true,
                ("-chunked", _) => chunked = true,
                ("-body", _) => {
                    let text = value(&mut i)?;
                    // As varnishtest, a `{...}` body has its backslash
                    // escapes read too (`\0` is a NUL byte); a quoted one
                    // had them read already.
                    let block = cmd.words.get(i).is_some_and(|w| w.block);
                    body = Some(if block {
                        crate::script::unescape(&text)
                    } else {
                        text.into_bytes()
                    });
                }
                ("-bodylen", _) => body = Some(synth_body(parse_num(&value(&mut i)?)? as usize)),
                ("-bodyfrom", _) => {
                    let path = value(&mut i)?;
                    body = Some(
                        std::fs::read(&path).map_err(|e| Fail(format!("-bodyfrom {path}: {e}")))?,
                    );
                }
                ("-gziplevel", _) => {
                    self.gzip_level = (parse_num(&value(&mut i)?)? as u32).min(9);
                }
                ("-gzipbody" | "-gziplen", _) => {
                    let plain = if w[i] == "-gzipbody" {
                        value(&mut i)?.into_bytes()
                    } else {
                        synth_body(parse_num(&value(&mut i)?)? as usize)
                    };
                    let z = match self.gzip_residual {
                        Some(r) => gzip::gzip_residual(&plain, self.gzip_level, r),
                        None => gzip::gzip(&plain, self.gzip_level),
                    };
                    log(
                        3,
                        &self.actor,
                        &format!("gzip {} -> {}", plain.len(), z.len()),
                    );
                    headers.push("Content-Encoding: gzip".to_string());
                    body = Some(z);
                }
                ("-gzipresidual", _) => {
                    let n = parse_num(&value(&mut i)?)?;
                    if n > 7 {
                        fail!("-gzipresidual {n}: a residual is 0 to 7 bits");
                    }
                    self.gzip_residual = Some(n as u8);
                }
                (other, _) => {
                    fail!("Unknown http {} spec: {other}", w[0])
                }
            }
            i += 1;
        }
        let mut head = format!("{a} {b} {c}\r\n");
        let has = |name: &str| {
            headers.iter().any(|h| {
                h.split(':')
                    .next()
                    .is_some_and(|n| n.trim().eq_ignore_ascii_case(name))
            })
        };
        // As varnishtest: an HTTP/1.0 request goes without a Host of its
        // own making.
        if request && !nohost && !has("host") && c != "HTTP/1.0" {
            head.push_str("Host: 127.0.0.1\r\n");
        }
        for h in &headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        let mut out = Vec::new();
        match (&body, chunked) {
            (Some(b), true) => {
                head.push_str("Transfer-Encoding: chunked\r\n\r\n");
                out.extend_from_slice(head.as_bytes());
                if !b.is_empty() {
                    out.extend_from_slice(format!("{:x}\r\n", b.len()).as_bytes());
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            (Some(b), false) => {
                if !nolen && !has("content-length") {
                    head.push_str(&format!("Content-Length: {}\r\n", b.len()));
                }
                head.push_str("\r\n");
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(b);
            }
            (None, _) => {
                head.push_str("\r\n");
                out.extend_from_slice(head.as_bytes());
            }
        }
        conn.send(w[0], &out)
    }
}

fn parse_num(s: &str) -> Step<u64> {
    s.trim()
        .parse()
        .map_err(|_| Fail(format!("not a number: \"{s}\"")))
}

pub fn delay(actor: &str, secs: &str) -> Step {
    let f: f64 = secs
        .parse()
        .map_err(|_| Fail(format!("delay: bad number \"{secs}\"")))?;
    log(3, actor, &format!("delaying {secs} second(s)"));
    std::thread::sleep(Duration::from_secs_f64(f.max(0.0)));
    Ok(())
}

/// [`delay`] for a server: cut short, as a failure its stop excuses,
/// when the test ends while it waits.
fn delay_unless(actor: &str, secs: &str, stopping: &std::sync::atomic::AtomicBool) -> Step {
    let f: f64 = secs
        .parse()
        .map_err(|_| Fail(format!("delay: bad number \"{secs}\"")))?;
    log(3, actor, &format!("delaying {secs} second(s)"));
    let end = std::time::Instant::now() + Duration::from_secs_f64(f.max(0.0));
    loop {
        if stopping.load(std::sync::atomic::Ordering::SeqCst) {
            fail!("stopped while delaying");
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

fn send_urgent(conn: &mut Conn, data: &[u8]) -> Step {
    crate::trace::dump(&conn.actor, "send_urgent", data);
    let Some(tcp) = conn.stream.tcp() else {
        fail!("send_urgent: not a TCP connection");
    };
    let sock = socket2::SockRef::from(tcp);
    for byte in data.chunks(1) {
        match sock.send_out_of_band(byte) {
            Ok(1) => {}
            Ok(_) => fail!("send_urgent failed: short write"),
            Err(e) => fail!("send_urgent failed: {e}"),
        }
    }
    Ok(())
}

/// Resolves a field name of `expect` (`resp.status`, `req.http.Host`,
/// …); anything else stands for itself. `None` is `<undef>`.
fn field(conn: &Conn, name: &str) -> Option<String> {
    let (msg, rest, request): (&Message, &str, bool) = if let Some(rest) = name.strip_prefix("req.")
    {
        (&conn.req, rest, true)
    } else if let Some(rest) = name.strip_prefix("resp.") {
        (&conn.resp, rest, false)
    } else {
        return (name != "<undef>").then(|| name.to_string());
    };
    let line = |i: usize| Some(msg.line[i].clone());
    match (rest, request) {
        ("method", true) => line(0),
        ("url", true) => line(1),
        ("proto", true) => line(2),
        ("proto", false) => line(0),
        ("status", false) => line(1),
        ("reason" | "msg", false) => line(2),
        ("bodylen", _) => msg.bodylen.map(|n| n.to_string()),
        ("body", _) => Some(String::from_utf8_lossy(&msg.body).into_owned()),
        ("chunklen", _) => msg.chunklen.map(|n| n.to_string()),
        _ => match rest.strip_prefix("http.") {
            Some(h) => msg.header(h).map(str::to_string),
            None => Some(name.to_string()),
        },
    }
}

fn expect(actor: &str, conn: &Conn, w: &[&str]) -> Step {
    if w.len() != 4 {
        fail!("expect: needs three arguments (left operator right)");
    }
    let undef = || "<undef>".to_string();
    let lhs = field(conn, w[1]).unwrap_or_else(undef);
    let op = w[2];
    let rhs = field(conn, w[3]).unwrap_or_else(undef);
    let ok = compare(&lhs, op, &rhs)?;
    let verdict = if ok { "match" } else { "failed" };
    let msg = format!("EXPECT {} ({lhs}) {op} \"{rhs}\" {verdict}", w[1]);
    if ok {
        log(4, actor, &msg);
        Ok(())
    } else {
        Err(Fail(msg))
    }
}

/// One comparison as `expect` makes it: strings for `==`/`!=`, numbers for
/// the orderings, a regex for `~`/`!~` (an undefined side is the text
/// `<undef>`).
pub fn compare(lhs: &str, op: &str, rhs: &str) -> Step<bool> {
    Ok(match op {
        "==" => lhs == rhs,
        "!=" => lhs != rhs,
        "~" | "!~" => {
            let re =
                regex::Regex::new(rhs).map_err(|e| Fail(format!("Bad regex \"{rhs}\": {e}")))?;
            matches(&re, lhs) == (op == "~")
        }
        "<" | ">" | "<=" | ">=" => {
            let num = |s: &str| -> Step<f64> {
                s.trim()
                    .parse()
                    .map_err(|_| Fail(format!("expect: \"{s}\" is not a number")))
            };
            let (a, b) = (num(lhs)?, num(rhs)?);
            match op {
                "<" => a < b,
                ">" => a > b,
                "<=" => a <= b,
                _ => a >= b,
            }
        }
        other => fail!("expect: unknown operator \"{other}\""),
    })
}

/// A match as varnishtest's regex library makes it: `$` also matches
/// before a final newline.
pub fn matches(re: &regex::Regex, text: &str) -> bool {
    re.is_match(text) || text.strip_suffix('\n').is_some_and(|t| re.is_match(t))
}

/// The `rx…` commands: a head, a body or a chunk read (`server`: what
/// comes is a request).
fn receive(conn: &mut Conn, w: &[&str], server: bool) -> Step {
    match w[0] {
        "rxreq" => {
            conn.rx_head(true)?;
            conn.rx_body(true, false)
        }
        "rxresp" => {
            conn.rx_head(false)?;
            if w.get(1) == Some(&"-no_obj") {
                return Ok(());
            }
            let status: u16 = conn.resp.line[1].parse().unwrap_or(0);
            if (100..200).contains(&status) || status == 204 || status == 304 {
                conn.resp.bodylen = Some(0);
                conn.resp.body.clear();
                return Ok(());
            }
            conn.rx_body(false, true)
        }
        "rxhdrs" => {
            let request = server;
            conn.rx_head(request)
        }
        "rxreqhdrs" => conn.rx_head(true),
        "rxresphdrs" => conn.rx_head(false),
        "rxbody" => {
            let request = server;
            conn.rx_body(request, !request)
        }
        "rxreqbody" => conn.rx_body(true, false),
        "rxrespbody" => conn.rx_body(false, true),
        "rxchunk" => conn.rx_chunk().map(|_| ()),
        _ => unreachable!("receive: {}", w[0]),
    }
}

/// The commands that send bytes as they are given: chunks, raw text,
/// repeats, urgent data and hex.
fn send_command(conn: &mut Conn, w: &[&str]) -> Step {
    let arg = |i: usize| -> Step<&str> {
        w.get(i)
            .copied()
            .ok_or_else(|| Fail(format!("{}: missing argument", w[0])))
    };
    match w[0] {
        "chunked" => {
            let data = arg(1)?.as_bytes();
            let mut out = format!("{:x}\r\n", data.len()).into_bytes();
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
            conn.send("chunked", &out)
        }
        "chunkedlen" => {
            let n = parse_num(arg(1)?)? as usize;
            let mut out = format!("{n:x}\r\n").into_bytes();
            if n > 0 {
                out.extend_from_slice(&synth_body(n));
            }
            out.extend_from_slice(b"\r\n");
            conn.send("chunked", &out)
        }
        "send" => conn.send("send", arg(1)?.as_bytes()),
        "send_n" => {
            let n = parse_num(arg(1)?)? as usize;
            let data = arg(2)?.as_bytes();
            for _ in 0..n {
                conn.send("send_n", data)?;
            }
            Ok(())
        }
        "send_urgent" => send_urgent(conn, arg(1)?.as_bytes()),
        "sendhex" => {
            let hex: String = arg(1)?.split_whitespace().collect();
            if hex.len() & 1 == 1 {
                fail!("sendhex: odd number of hex digits");
            }
            let mut out = Vec::new();
            for i in (0..hex.len()).step_by(2) {
                out.push(
                    u8::from_str_radix(&hex[i..i + 2], 16)
                        .map_err(|_| Fail(format!("sendhex: bad hex \"{}\"", &hex[i..i + 2])))?,
                );
            }
            conn.send("sendhex", &out)
        }
        _ => unreachable!("send_command: {}", w[0]),
    }
}
