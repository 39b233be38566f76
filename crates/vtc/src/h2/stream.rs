//! A stream's spec: its commands run in order, in the thread of the
//! client or server (`-run`) or in one of their own (`-start`). This
//! module has the receiving side (`rxreq`, `rxresp`, `rxhdrs`, `rxdata`,
//! `rxrst`, …), `expect`, and the commands any spec has (`delay`,
//! `barrier`, `loop`); `tx` has the sending side.

use super::conn::H2;
use super::frame::{self, Frame, Meta};
use super::vars;
use crate::fail;
use crate::script::{self, Command, Word};
use crate::state::World;
use crate::trace::{log, Fail, Step};
use std::io::Read;
use std::sync::Arc;

/// What a stream's commands run with.
pub struct StreamCtx {
    pub h2: Arc<H2>,
    pub id: u32,
    /// The name in the trace: the client's or server's, dot, the id.
    pub actor: String,
    pub world: Arc<World>,
    pub gzip_level: u32,
}

impl StreamCtx {
    pub fn run(&self, spec: &str) -> Step {
        let cmds = script::parse(spec)?;
        self.run_commands(&cmds)
    }

    fn run_commands(&self, cmds: &[Command]) -> Step {
        for cmd in cmds {
            let blocks = cmd.words.first().is_none_or(|w| w.text != "loop");
            let cmd = cmd.expand_with(&self.world.macros, blocks)?;
            log(
                2,
                &self.actor,
                &format!("=== {}", crate::session::echo(&cmd)),
            );
            self.step(&cmd)?;
        }
        Ok(())
    }

    fn step(&self, cmd: &Command) -> Step {
        let w: Vec<&str> = cmd.words.iter().map(|w| w.text.as_str()).collect();
        let arg = |i: usize| -> Step<&str> {
            w.get(i)
                .copied()
                .ok_or_else(|| Fail(format!("{}: missing argument", w[0])))
        };
        match w[0] {
            "txreq" | "txresp" | "txpush" | "txcont" => self.tx_headers(&w),
            "txdata" => self.txdata(&w),
            "txrst" => self.txrst(&w),
            "txprio" => self.txprio(&w),
            "txsettings" => self.txsettings(&w),
            "txping" => self.txping(&w),
            "txgoaway" => self.txgoaway(&w),
            "txwinup" => self.txwinup(&w),
            "sendhex" => {
                let data = super::parse_hex(arg(1)?)?;
                crate::trace::dump(&self.actor, "sendhex", &data);
                self.h2.send_raw(&data)
            }
            "rxreq" | "rxresp" => self.rxmsg(w[0]),
            "rxhdrs" => self.rx_some(&w, frame::HEADERS, frame::CONTINUATION, frame::END_HEADERS),
            "rxpush" => self.rx_some(
                &w,
                frame::PUSH_PROMISE,
                frame::CONTINUATION,
                frame::END_HEADERS,
            ),
            "rxcont" => self.rx_some(
                &w,
                frame::CONTINUATION,
                frame::CONTINUATION,
                frame::END_HEADERS,
            ),
            "rxdata" => self.rx_some(&w, frame::DATA, frame::DATA, frame::END_STREAM),
            "rxprio" => self.rx_one(frame::PRIORITY).map(|_| ()),
            "rxrst" => self.rx_one(frame::RST_STREAM).map(|_| ()),
            "rxping" => self.rx_one(frame::PING).map(|_| ()),
            "rxgoaway" => self.rx_one(frame::GOAWAY).map(|_| ()),
            "rxwinup" => {
                if let Meta::WinUp { size } = self.rx_one(frame::WINDOW_UPDATE)? {
                    let mut st = self.h2.state();
                    if self.id == 0 {
                        st.win_peer.size += i64::from(size);
                    }
                    st.stream(self.id).win_peer += i64::from(size);
                }
                Ok(())
            }
            "rxsettings" => {
                if let Meta::Settings { values } = self.rx_one(frame::SETTINGS)? {
                    if let Some(v) = values[4] {
                        let mut st = self.h2.state();
                        let delta = i64::from(v) - st.win_peer.init;
                        for s in st.streams.values_mut() {
                            s.win_peer += delta;
                        }
                        st.win_peer.init = i64::from(v);
                    }
                }
                Ok(())
            }
            "rxframe" => {
                let f = self.h2.rx(self.id)?;
                self.h2.state().stream(self.id).frame = Some(f);
                Ok(())
            }
            "expect" => self.expect(&w),
            "gunzip" => {
                let mut st = self.h2.state();
                let s = st.stream(self.id);
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&s.body[..])
                    .read_to_end(&mut plain)
                    .map_err(|e| Fail(format!("Gunzip error = {e}")))?;
                log(3, &self.actor, &format!("new bodylen {}", plain.len()));
                s.body = plain;
                Ok(())
            }
            "write_body" => {
                let path = arg(1)?;
                let body = self.h2.state().stream(self.id).body.clone();
                std::fs::write(path, body).map_err(|e| Fail(format!("failed to write body: {e}")))
            }
            "delay" => crate::session::delay(&self.actor, arg(1)?),
            "barrier" => self.world.barrier(arg(1)?)?.sync(&self.actor),
            "loop" => {
                let n = super::parse_u32(arg(1)?)
                    .ok_or_else(|| Fail("loop: needs a number".to_string()))?;
                let Some(Word { text, block: true }) = cmd.words.get(2) else {
                    fail!("loop: needs a {{...}} spec");
                };
                let cmds = script::parse(text)?;
                for i in 0..n {
                    log(3, &self.actor, &format!("Loop #{i}"));
                    self.run_commands(&cmds)?;
                }
                Ok(())
            }
            other => fail!("Unknown command: \"{other}\""),
        }
    }

    /// Takes the stream's next frame (the last one a command took is
    /// forgotten, as in varnishtest).
    fn take(&self) -> Step<Frame> {
        self.h2.state().stream(self.id).frame = None;
        self.h2.rx(self.id)
    }

    fn keep(&self, f: Frame) {
        self.h2.state().stream(self.id).frame = Some(f);
    }

    /// One frame of one type (`rxrst`, `rxping`, …); returns what it says.
    fn rx_one(&self, want: u8) -> Step<Meta> {
        let f = self.take()?;
        if f.kind != want {
            let got = f.kind;
            self.keep(f);
            fail!(
                "Wrong frame type {} ({got}) wanted {}",
                frame::type_name(got),
                frame::type_name(want)
            );
        }
        let meta = f.meta.clone();
        self.keep(f);
        Ok(meta)
    }

    /// `rxhdrs`, `rxcont`, `rxpush`, `rxdata`: a first frame then more
    /// of `then`, `-some N` frames in all, or with `-all` until one has
    /// the `until` flag.
    fn rx_some(&self, w: &[&str], first: u8, then: u8, until: u8) -> Step {
        let mut times = 1u32;
        let mut all = false;
        let mut i = 1;
        while i < w.len() {
            match w[i] {
                "-some" => {
                    i += 1;
                    times = w
                        .get(i)
                        .and_then(|v| super::parse_u32(v))
                        .ok_or_else(|| Fail("-some takes an integer as argument".to_string()))?;
                    if times == 0 {
                        fail!("-some argument must be more than 0");
                    }
                }
                "-all" => all = true,
                other => fail!("Unknown {} spec: {other}", w[0]),
            }
            i += 1;
        }
        let mut rcv = 0;
        let mut want = first;
        loop {
            let f = self.take()?;
            rcv += 1;
            check(&f, want, rcv, w[0])?;
            want = then;
            let more = rcv < times || (all && f.flags & until == 0);
            self.keep(f);
            if !more {
                return Ok(());
            }
        }
    }

    /// `rxreq` and `rxresp`: HEADERS (window updates before it skipped),
    /// its CONTINUATIONs, then DATA until END_STREAM.
    fn rxmsg(&self, cmd: &str) -> Step {
        if (cmd == "rxreq") != self.h2.server {
            let who = if self.h2.server { "client" } else { "server" };
            fail!("\"{cmd}\" only possible in {who}");
        }
        let mut f = self.take()?;
        while f.kind == frame::WINDOW_UPDATE {
            f = self.h2.rx(self.id)?;
        }
        let mut rcv = 1;
        check(&f, frame::HEADERS, rcv, cmd)?;
        let end_stream = f.flags & frame::END_STREAM != 0;
        while f.flags & frame::END_HEADERS == 0 {
            f = self.h2.rx(self.id)?;
            rcv += 1;
            check(&f, frame::CONTINUATION, rcv, cmd)?;
        }
        let mut ended = end_stream;
        while !ended {
            f = self.h2.rx(self.id)?;
            rcv += 1;
            check(&f, frame::DATA, rcv, cmd)?;
            ended = f.flags & frame::END_STREAM != 0;
        }
        self.keep(f);
        Ok(())
    }

    fn expect(&self, w: &[&str]) -> Step {
        if w.len() != 4 {
            fail!("expect: needs three arguments (left operator right)");
        }
        let (lhs, rhs) = {
            let mut st = self.h2.state();
            (
                vars::resolve(&mut st, self.id, w[1])?,
                vars::resolve(&mut st, self.id, w[3])?,
            )
        };
        let undef = || "<undef>".to_string();
        let (lhs, rhs) = (lhs.unwrap_or_else(undef), rhs.unwrap_or_else(undef));
        let ok = crate::session::compare(&lhs, w[2], &rhs)?;
        let msg = format!(
            "EXPECT {} ({lhs}) {} \"{rhs}\" {}",
            w[1],
            w[2],
            if ok { "match" } else { "failed" }
        );
        if !ok {
            return Err(Fail(msg));
        }
        log(4, &self.actor, &msg);
        Ok(())
    }
}

/// Fails unless frame number `rcv` of a command is of type `want`.
/// A reset or GOAWAY in place of the frame wanted says its error code.
fn check(f: &Frame, want: u8, rcv: u32, cmd: &str) -> Step {
    if f.kind != want {
        let why = match f.meta {
            Meta::Rst { err } | Meta::GoAway { err, .. } => {
                format!(", error {} ({err})", frame::error_name(err))
            }
            _ => String::new(),
        };
        fail!(
            "Frame #{rcv} for {cmd} was of type {} ({}) instead of {} ({want}){why}",
            frame::type_name(f.kind),
            f.kind,
            frame::type_name(want)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_in_place_of_a_response_says_its_error() {
        let rst = Frame {
            kind: frame::RST_STREAM,
            flags: 0,
            stream: 7,
            payload: vec![0, 0, 0, 8],
            meta: Meta::Rst { err: 8 },
        };
        let Err(Fail(why)) = check(&rst, frame::HEADERS, 1, "rxresp") else {
            panic!("a reset is not a HEADERS frame");
        };
        assert_eq!(
            why,
            "Frame #1 for rxresp was of type RST_STREAM (3) instead of HEADERS (1), error CANCEL (8)"
        );
        assert!(check(&rst, frame::RST_STREAM, 1, "rxrst").is_ok());
    }
}
