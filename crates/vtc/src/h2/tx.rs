//! The sending commands of a stream: `txreq`, `txresp`, `txpush` and
//! `txcont` (header blocks, written exactly as asked: `-hdr` fields as
//! plain literals without indexing, `-idxHdr`, `-litIdxHdr`, `-litHdr`,
//! then the default pseudo-headers, as varnishtest orders them), and
//! `txdata`, `txrst`, `txprio`, `txsettings`, `txping`, `txgoaway`,
//! `txwinup`.

use super::frame::{self, CONTINUATION, DATA, HEADERS, PUSH_PROMISE};
use super::hpack::{self, Indexing, Rep};
use super::parse_u32;
use super::stream::StreamCtx;
use crate::fail;
use crate::http::synth_body;
use crate::trace::{log, Fail, Step};

/// The words of a command, read one by one.
struct Args<'a> {
    w: &'a [&'a str],
    i: usize,
}

impl<'a> Args<'a> {
    /// The next word as an error code, by name or number.
    fn error_code(&mut self) -> Step<u32> {
        let v = self.value()?;
        frame::parse_error(v)
            .ok_or_else(|| Fail(format!("-err takes an integer as argument (found {v})")))
    }

    fn next(&mut self) -> Option<&'a str> {
        self.i += 1;
        self.w.get(self.i).copied()
    }

    fn value(&mut self) -> Step<&'a str> {
        let opt = self.w[self.i];
        self.next()
            .ok_or_else(|| Fail(format!("{}: {opt} needs a value", self.w[0])))
    }

    /// A number of at most `bits` bits (0: any u32).
    fn num(&mut self, bits: u32) -> Step<u32> {
        let opt = self.w[self.i];
        let v = self.value()?;
        let n = parse_u32(v)
            .ok_or_else(|| Fail(format!("{opt} takes an integer as argument (found {v})")))?;
        if bits > 0 && u64::from(n) >= 1u64 << bits {
            fail!("{opt} must be a {bits}-bits integer (found {v})");
        }
        Ok(n)
    }

    fn huff(&mut self, what: &str) -> Step<bool> {
        match self.value()? {
            "huf" => Ok(true),
            "plain" => Ok(false),
            other => fail!("{what} arg can be huf or plain (got: {other})"),
        }
    }
}

fn plain(name: &str, value: &str) -> Rep {
    Rep::Lit {
        how: Indexing::Not,
        name: name.as_bytes().to_vec(),
        name_huff: false,
        value: value.as_bytes().to_vec(),
        huff: false,
    }
}

/// Padding: a length octet first, the padding last.
fn pad(payload: Vec<u8>, padding: &[u8]) -> Step<Vec<u8>> {
    if padding.len() > 255 {
        fail!("Padding is limited to 255 bytes");
    }
    let mut out = Vec::with_capacity(payload.len() + padding.len() + 1);
    out.push(padding.len() as u8);
    out.extend_from_slice(&payload);
    out.extend_from_slice(padding);
    Ok(out)
}

impl StreamCtx {
    pub(super) fn tx_headers(&self, w: &[&str]) -> Step {
        let cmd = w[0];
        let server = self.h2.server;
        let (kind, mut flags) = match cmd {
            "txreq" if server => fail!("\"txreq\" only possible in client"),
            "txresp" if !server => fail!("\"txresp\" only possible in server"),
            "txpush" if !server => fail!("\"txpush\" only possible in server"),
            "txreq" | "txresp" => (HEADERS, frame::END_HEADERS | frame::END_STREAM),
            "txpush" => (PUSH_PROMISE, frame::END_HEADERS),
            _ => (CONTINUATION, frame::END_HEADERS),
        };
        let request = matches!(cmd, "txreq" | "txpush");
        let message = matches!(cmd, "txreq" | "txresp");
        let (mut status, mut path, mut method, mut scheme) =
            (cmd != "txresp", !request, !request, !request);
        let mut reps: Vec<Rep> = Vec::new();
        let mut body: Option<Vec<u8>> = None;
        let mut padding: Option<Vec<u8>> = None;
        let mut prio: Option<(u32, bool, u32)> = None;
        let mut promised = 0u32;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-noadd" => (status, path, method, scheme) = (true, true, true, true),
                "-status" if cmd == "txresp" => {
                    reps.push(plain(":status", a.value()?));
                    status = true;
                }
                "-url" if request => {
                    reps.push(plain(":path", a.value()?));
                    path = true;
                }
                "-method" | "-req" if request => {
                    reps.push(plain(":method", a.value()?));
                    method = true;
                }
                "-scheme" if request => {
                    reps.push(plain(":scheme", a.value()?));
                    scheme = true;
                }
                "-hdr" => {
                    let name = a.value()?;
                    let value = a
                        .next()
                        .ok_or_else(|| Fail("-hdr takes two arguments in http2".to_string()))?;
                    reps.push(plain(name, value));
                }
                "-hdrlen" => {
                    let name = a.value()?;
                    let n = a.num(0)? as usize;
                    reps.push(plain(name, &"x".repeat(n)));
                }
                "-idxHdr" => reps.push(Rep::Indexed(a.num(0)? as usize)),
                "-litIdxHdr" | "-litHdr" => reps.push(literal(&mut a, opt)?),
                // Plain strings are what -hdr writes anyway.
                "-nohuffman" => {}
                "-nostrend" => flags &= !frame::END_STREAM,
                "-nohdrend" => flags &= !frame::END_HEADERS,
                "-promised" if cmd == "txpush" => promised = a.num(31)?,
                "-pad" if kind != CONTINUATION => {
                    padding = Some(a.value()?.as_bytes().to_vec());
                }
                "-padlen" if kind != CONTINUATION => {
                    padding = Some(synth_body(a.num(0)? as usize));
                }
                "-body" if message => body = Some(a.value()?.as_bytes().to_vec()),
                "-bodylen" if message => body = Some(synth_body(a.num(0)? as usize)),
                "-bodyfrom" if message => {
                    let path = a.value()?;
                    body = Some(
                        std::fs::read(path).map_err(|e| Fail(format!("-bodyfrom {path}: {e}")))?,
                    );
                }
                "-gzipbody" | "-gziplen" if message => {
                    let plain_body = if opt == "-gzipbody" {
                        a.value()?.as_bytes().to_vec()
                    } else {
                        synth_body(a.num(0)? as usize)
                    };
                    let z = crate::gzip::gzip(&plain_body, self.gzip_level);
                    log(
                        3,
                        &self.actor,
                        &format!("gzip {} -> {}", plain_body.len(), z.len()),
                    );
                    reps.push(plain("content-encoding", "gzip"));
                    body = Some(z);
                }
                "-dep" if message => {
                    let d = a.num(0)?;
                    let p = prio.get_or_insert((0, false, 16));
                    p.0 = d;
                }
                "-ex" if message => prio.get_or_insert((0, false, 16)).1 = true,
                "-weight" if message => {
                    let wt = a.num(8)?;
                    prio.get_or_insert((0, false, 16)).2 = wt;
                }
                other => fail!("Unknown {cmd} spec: {other}"),
            }
        }
        if body.is_some() {
            flags &= !frame::END_STREAM;
        }
        if !status {
            reps.push(plain(":status", "200"));
        }
        if !path {
            reps.push(plain(":path", "/"));
        }
        if !method {
            reps.push(plain(":method", "GET"));
        }
        if !scheme {
            reps.push(plain(":scheme", "http"));
        }
        if let Some(prio) = prio {
            flags |= frame::PRIORITY_FLAG;
            self.set_priority(prio);
        }
        if padding.is_some() {
            flags |= frame::PADDED;
        }
        let id = self.id;
        self.h2.send_built(&self.actor, id, kind, flags, |st| {
            let mut block = Vec::new();
            for r in &reps {
                hpack::encode(&mut st.enc, r, &mut block)
                    .map_err(|e| Fail(format!("{cmd}: {e}")))?;
            }
            let mut payload = Vec::new();
            if kind == PUSH_PROMISE {
                payload.extend_from_slice(&promised.to_be_bytes());
            }
            if let Some((dep, exclusive, weight)) = prio {
                let d = dep | if exclusive { 1 << 31 } else { 0 };
                payload.extend_from_slice(&d.to_be_bytes());
                payload.push(weight as u8);
            }
            payload.extend_from_slice(&block);
            match &padding {
                Some(p) => pad(payload, p),
                None => Ok(payload),
            }
        })?;
        if let Some(b) = body {
            self.h2.send(&self.actor, id, DATA, frame::END_STREAM, &b)?;
        }
        Ok(())
    }

    /// A stream's priority as `-dep`, `-ex` and `-weight` give it.
    fn set_priority(&self, prio: (u32, bool, u32)) {
        let (dep, exclusive, weight) = prio;
        let mut st = self.h2.state();
        let s = st.stream(self.id);
        s.weight = weight as u8;
        s.dependency = dep;
        log(4, &self.actor, &format!("stream->dependency: {dep}"));
        log(4, &self.actor, &format!("stream->weight: {weight}"));
        if exclusive {
            st.exclusive(self.id);
        }
    }

    pub(super) fn txdata(&self, w: &[&str]) -> Step {
        let mut flags = frame::END_STREAM;
        let mut data = Vec::new();
        let mut padding = None;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-data" => data = a.value()?.as_bytes().to_vec(),
                "-datalen" => data = synth_body(a.num(0)? as usize),
                "-pad" => padding = Some(a.value()?.as_bytes().to_vec()),
                "-padlen" => padding = Some(synth_body(a.num(0)? as usize)),
                "-nostrend" => flags &= !frame::END_STREAM,
                other => fail!("Unknown txdata spec: {other}"),
            }
        }
        let payload = match padding {
            Some(p) => {
                flags |= frame::PADDED;
                pad(data, &p)?
            }
            None => data,
        };
        {
            // Like varnishtest, the frame goes out whatever the windows
            // say: a test may mean to overrun them.
            let mut st = self.h2.state();
            let n = payload.len() as i64;
            let (conn, own) = (st.win_peer.size, st.stream(self.id).win_peer);
            if n > conn.min(own) {
                log(
                    3,
                    &self.actor,
                    &format!("txdata: {n} bytes past the peer's window (stream {own}, connection {conn})"),
                );
            }
        }
        self.h2.send(&self.actor, self.id, DATA, flags, &payload)
    }

    pub(super) fn txrst(&self, w: &[&str]) -> Step {
        let mut err = 0;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-err" => err = a.error_code()?,
                other => fail!("Unknown txrst spec: {other}"),
            }
        }
        self.h2.send(
            &self.actor,
            self.id,
            frame::RST_STREAM,
            0,
            &err.to_be_bytes(),
        )
    }

    pub(super) fn txprio(&self, w: &[&str]) -> Step {
        let (mut dep, mut exclusive, mut weight) = (0u32, false, 0u32);
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-stream" => dep = a.num(0)?,
                "-ex" => exclusive = true,
                "-weight" => weight = a.num(8)?,
                other => fail!("Unknown txprio spec: {other}"),
            }
        }
        {
            let mut st = self.h2.state();
            let s = st.stream(self.id);
            s.weight = weight as u8;
            s.dependency = dep;
            if exclusive {
                st.exclusive(self.id);
            }
        }
        let mut p = (dep | if exclusive { 1 << 31 } else { 0 })
            .to_be_bytes()
            .to_vec();
        p.push(weight as u8);
        self.h2.send(&self.actor, self.id, frame::PRIORITY, 0, &p)
    }

    pub(super) fn txsettings(&self, w: &[&str]) -> Step {
        let mut flags = 0;
        let mut p = Vec::new();
        let mut put = |id: u16, v: u32| {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        };
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-push" => match a.value()? {
                    "true" => put(2, 1),
                    "false" => put(2, 0),
                    v => fail!("Push parameter is either \"true\" or \"false\", not {v}"),
                },
                "-hdrtbl" => {
                    let v = a.num(0)?;
                    put(1, v);
                    self.h2.state().dec.resize(v as usize);
                }
                "-maxstreams" => put(3, a.num(0)?),
                "-winsize" => {
                    let v = a.num(0)?;
                    put(4, v);
                    let mut st = self.h2.state();
                    let delta = i64::from(v) - st.win_self.init;
                    for s in st.streams.values_mut() {
                        s.win_self += delta;
                    }
                    st.win_self.init = i64::from(v);
                }
                "-framesize" => put(5, a.num(0)?),
                "-hdrsize" => put(6, a.num(0)?),
                "-ack" => flags |= frame::ACK,
                other => fail!("Unknown txsettings spec: {other}"),
            }
        }
        self.h2
            .send(&self.actor, self.id, frame::SETTINGS, flags, &p)
    }

    pub(super) fn txping(&self, w: &[&str]) -> Step {
        let mut flags = 0;
        let mut data: Option<Vec<u8>> = None;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-data" => {
                    let v = a.value()?;
                    if data.is_some() {
                        fail!("this frame already has data");
                    }
                    if v.len() != 8 {
                        fail!("data must be a 8-char string, found ({v})");
                    }
                    data = Some(v.as_bytes().to_vec());
                }
                "-ack" => flags |= frame::ACK,
                other => fail!("Unknown txping spec: {other}"),
            }
        }
        let data = data.unwrap_or_else(|| vec![0; 8]);
        self.h2
            .send(&self.actor, self.id, frame::PING, flags, &data)
    }

    pub(super) fn txgoaway(&self, w: &[&str]) -> Step {
        let (mut err, mut last) = (0u32, 0u32);
        let mut debug: Option<Vec<u8>> = None;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-err" => err = a.error_code()?,
                "-laststream" => last = a.num(31)?,
                "-debug" => {
                    if debug.is_some() {
                        fail!("this frame already has debug data");
                    }
                    debug = Some(a.value()?.as_bytes().to_vec());
                }
                other => fail!("Unknown txgoaway spec: {other}"),
            }
        }
        let mut p = last.to_be_bytes().to_vec();
        p.extend_from_slice(&err.to_be_bytes());
        p.extend_from_slice(debug.as_deref().unwrap_or_default());
        self.h2.send(&self.actor, self.id, frame::GOAWAY, 0, &p)
    }

    pub(super) fn txwinup(&self, w: &[&str]) -> Step {
        let mut size = None;
        let mut a = Args { w, i: 0 };
        while let Some(opt) = a.next() {
            match opt {
                "-size" => size = Some(a.num(0)?),
                other => fail!("Unknown txwinup spec: {other}"),
            }
        }
        let Some(size) = size else {
            fail!("txwinup: needs -size");
        };
        {
            let mut st = self.h2.state();
            if self.id == 0 {
                st.win_self.size += i64::from(size);
            }
            st.stream(self.id).win_self += i64::from(size);
        }
        self.h2.send(
            &self.actor,
            self.id,
            frame::WINDOW_UPDATE,
            0,
            &size.to_be_bytes(),
        )
    }
}

/// A literal header representation (`-litIdxHdr`: an indexed name,
/// `-litHdr`: a literal name), read from the spec's words.
fn literal(a: &mut Args<'_>, opt: &str) -> Step<Rep> {
    if opt == "-litIdxHdr" {
        let how = a.value()?;
        let how = Indexing::parse(how).ok_or_else(|| {
            Fail(format!(
                "first -litidxHdr arg can be inc, not, never (got: {how})"
            ))
        })?;
        let index = a.num(0)? as usize;
        let huff = a.huff("third -litIdxHdr")?;
        let value = a.value()?.as_bytes().to_vec();
        Ok(Rep::LitIdx {
            how,
            index,
            value,
            huff,
        })
    } else {
        let how = a.value()?;
        let how = Indexing::parse(how).ok_or_else(|| {
            Fail(format!(
                "first -litHdr arg can be inc, not, never (got: {how})"
            ))
        })?;
        let name_huff = a.huff("second -litHdr")?;
        let name = a.value()?.as_bytes().to_vec();
        let huff = a.huff("fourth -litHdr")?;
        let value = a.value()?.as_bytes().to_vec();
        Ok(Rep::Lit {
            how,
            name,
            name_huff,
            value,
            huff,
        })
    }
}
