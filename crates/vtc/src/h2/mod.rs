//! HTTP/2 in client and server specs (vtc(7), "stream"): `txpri` and
//! `rxpri` turn a connection to HTTP/2, `stream ID {spec} -run|-start|
//! -wait` runs a stream's spec (stream 0 for the connection's frames),
//! `settings -dectbl` sizes the decoder's table. The runner's own codec
//! lives here, separate from the product's: frames (`frame`), HPACK
//! (`hpack`, `huffman`), the connection and its reader (`conn`), the
//! stream commands (`stream`, `tx`) and what `expect` sees (`vars`).

pub mod conn;
pub mod frame;
pub mod hpack;
pub mod huffman;
mod stream;
mod tx;
mod vars;

use crate::fail;
use crate::http::Conn;
use crate::session::Session;
use crate::trace::{dump, fatal, log, Fail, Step};
use conn::H2;
use std::sync::Arc;
use std::time::Duration;

pub use stream::StreamCtx;

/// The connection preface a client sends first.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A number as strtoul reads it with base 0: decimal, `0x` hex, or
/// octal with a leading 0.
pub fn parse_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    u32::try_from(v).ok()
}

/// The bytes a `sendhex` argument spells (white space ignored).
pub fn parse_hex(text: &str) -> Step<Vec<u8>> {
    let hex: String = text.split_whitespace().collect();
    if hex.len() % 2 == 1 {
        fail!("sendhex: odd number of hex digits");
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .map_err(|_| Fail(format!("sendhex: bad hex \"{}\"", &hex[i..i + 2])))
        })
        .collect()
}

/// The connection-level HTTP/2 commands of a client or server spec;
/// `None` when `w[0]` is not one of them.
pub fn command(s: &mut Session, conn: &mut Conn, w: &[&str]) -> Option<Step> {
    Some(match w[0] {
        "txpri" => txpri(s, conn),
        "rxpri" => rxpri(s, conn),
        "stream" => stream_command(s, conn, w),
        "settings" => settings(conn, w),
        _ => return None,
    })
}

fn start(s: &Session, conn: &mut Conn, early: Vec<u8>) -> Step {
    let h2 = H2::start(
        &s.actor,
        s.server,
        &conn.stream,
        early,
        conn.timeout,
        s.stopping.clone(),
    )?;
    conn.h2 = Some(h2);
    Ok(())
}

fn txpri(s: &Session, conn: &mut Conn) -> Step {
    if s.server {
        fail!("\"txpri\" only possible in client");
    }
    if conn.h2.is_some() {
        fail!("txpri: the connection is already HTTP/2");
    }
    // Dribbled out in two writes, as varnishtest does.
    dump(&s.actor, "txpri", PREFACE);
    conn.send_quiet(&PREFACE[..18])?;
    std::thread::sleep(Duration::from_millis(10));
    conn.send_quiet(&PREFACE[18..])?;
    start(s, conn, Vec::new())
}

fn rxpri(s: &Session, conn: &mut Conn) -> Step {
    if !s.server {
        fail!("\"rxpri\" only possible in server");
    }
    if conn.h2.is_some() {
        fail!("rxpri: the connection is already HTTP/2");
    }
    let got = conn
        .take(PREFACE.len())
        .map_err(|Fail(m)| Fail(format!("Couldn't retrieve connection preface: {m}")))?;
    dump(&s.actor, "rxpri", &got);
    if got != PREFACE {
        fail!("Received invalid preface");
    }
    let early = conn.take_buffered();
    start(s, conn, early)
}

fn settings(conn: &mut Conn, w: &[&str]) -> Step {
    let Some(h2) = &conn.h2 else {
        fail!("settings: only possible in HTTP/2 mode");
    };
    let mut i = 1;
    while i < w.len() {
        match w[i] {
            "-dectbl" => {
                let n = w
                    .get(i + 1)
                    .and_then(|v| parse_u32(v))
                    .ok_or_else(|| Fail("-dectbl takes an integer as argument".to_string()))?;
                h2.state().dec.resize(n as usize);
                i += 2;
            }
            other => fail!("Unknown settings spec: {other}"),
        }
    }
    Ok(())
}

/// What a first `stream` does on a connection not yet in HTTP/2: the
/// preface, then the exchange of settings on stream 0.
const HANDSHAKE: &str =
    "txsettings\nrxsettings\ntxsettings -ack\nrxsettings\nexpect settings.ack == true\n";

fn stream_command(s: &mut Session, conn: &mut Conn, w: &[&str]) -> Step {
    if w.len() < 2 {
        fail!("stream: needs a stream id");
    }
    if conn.h2.is_none() {
        log(4, &s.actor, "Not in H/2 mode, do what's needed");
        if s.server {
            rxpri(s, conn)?;
        } else {
            txpri(s, conn)?;
        }
        let h2 = conn.h2.clone().expect("just started");
        let id = h2.stream_id("0")?;
        ctx(s, &h2, id).run(HANDSHAKE)?;
    }
    let h2 = conn.h2.clone().expect("HTTP/2 by now");
    let id = h2.stream_id(w[1])?;
    for arg in &w[2..] {
        match *arg {
            "-wait" => wait(&h2, id)?,
            "-start" => {
                wait(&h2, id)?;
                start_stream(s, &h2, id)?;
            }
            "-run" => {
                wait(&h2, id)?;
                let spec = spec_of(&h2, id)?;
                log(2, &s.actor, &format!("Starting stream {id}"));
                ctx(s, &h2, id).run(&spec)?;
                log(
                    2,
                    &format!("{}.{id}", s.actor),
                    &format!("Ending stream {id}"),
                );
            }
            a if a.starts_with('-') => fail!("Unknown stream argument: {a}"),
            spec => {
                h2.specs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id, spec.to_string());
            }
        }
    }
    Ok(())
}

fn ctx(s: &Session, h2: &Arc<H2>, id: u32) -> StreamCtx {
    StreamCtx {
        h2: h2.clone(),
        id,
        actor: format!("{}.{id}", s.actor),
        world: s.world.clone(),
        gzip_level: s.gzip_level,
    }
}

fn spec_of(h2: &H2, id: u32) -> Step<String> {
    h2.specs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned()
        .ok_or_else(|| Fail(format!("stream {id}: no spec to run")))
}

fn start_stream(s: &Session, h2: &Arc<H2>, id: u32) -> Step {
    let spec = spec_of(h2, id)?;
    let c = ctx(s, h2, id);
    let non_fatal = s.non_fatal;
    log(2, &s.actor, &format!("Starting stream {id}"));
    let t = std::thread::spawn(move || {
        let r = c.run(&spec);
        match &r {
            Err(Fail(m)) if !c.h2.ending() => {
                if non_fatal {
                    log(1, &c.actor, &format!("Failure ignored (non_fatal): {m}"));
                } else {
                    fatal(&c.actor, m);
                }
            }
            _ => log(2, &c.actor, &format!("Ending stream {id}")),
        }
        r
    });
    h2.threads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, t);
    Ok(())
}

/// Waits for a started stream; its failure is this command's.
fn wait(h2: &H2, id: u32) -> Step {
    let t = h2
        .threads
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    let Some(t) = t else {
        return Ok(());
    };
    log(2, &h2.actor, &format!("Waiting for stream {id}"));
    match t.join() {
        Ok(r) => r,
        Err(_) => fail!("Stream {id} panicked"),
    }
}

/// Ends HTTP/2 on a connection, if it was on.
pub fn stop(conn: &mut Conn, failed: bool) {
    if let Some(h2) = conn.h2.take() {
        h2.stop(failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_strtoul_reads_them() {
        assert_eq!(parse_u32("42"), Some(42));
        assert_eq!(parse_u32("0x10"), Some(16));
        assert_eq!(parse_u32("010"), Some(8));
        assert_eq!(parse_u32("0"), Some(0));
        assert_eq!(parse_u32("4294967296"), None);
        assert_eq!(parse_u32("12a"), None);
        assert_eq!(parse_hex("00 0a\tFF").unwrap(), vec![0, 10, 255]);
        assert!(parse_hex("0").is_err());
        assert!(parse_hex("zz").is_err());
    }
}
