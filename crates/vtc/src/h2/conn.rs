//! One HTTP/2 connection of a client or server: the socket shared by its
//! streams (writes whole frames under a lock), the reader thread, and
//! the state the streams share. As in varnishtest, the reader reads only
//! while some stream waits for a frame; each frame goes to the queue of
//! its stream (the reader waits for a stream that does not exist yet),
//! header blocks are decoded as they arrive, in wire order, and what the
//! peer breaks ends the connection with a message every waiting stream
//! fails with.

use super::frame::{self, Frame, Meta};
use super::hpack::{self, Table};
use crate::fail;
use crate::net::Stream;
use crate::trace::{log, Fail, Step};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A flow-control window: its initial size (SETTINGS) and current size.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub init: i64,
    pub size: i64,
}

/// What a stream has received and the state the commands keep.
#[derive(Debug)]
pub struct StreamState {
    pub queue: VecDeque<Frame>,
    wanting: bool,
    /// Our receive window (DATA received takes from it, `txwinup` gives).
    pub win_self: i64,
    /// The peer's window (DATA sent takes from it, `rxwinup` gives).
    pub win_peer: i64,
    pub req: Vec<(String, String)>,
    pub resp: Vec<(String, String)>,
    /// Every DATA payload received on the stream, in order.
    pub body: Vec<u8>,
    pub weight: u8,
    pub dependency: u32,
    /// The last frame a command took.
    pub frame: Option<Frame>,
}

/// The state streams share, under one lock.
pub struct State {
    pub streams: HashMap<u32, StreamState>,
    wanted: usize,
    running: bool,
    /// Why the connection can no longer be read.
    pub dead: Option<String>,
    pub win_self: Window,
    pub win_peer: Window,
    pub dec: Table,
    pub enc: Table,
    /// The last stream made, for `stream next`.
    pub last_stream: Option<u32>,
}

impl State {
    pub fn stream(&mut self, id: u32) -> &mut StreamState {
        self.streams
            .get_mut(&id)
            .expect("streams are made before use")
    }

    /// Makes the other streams that depended on the same stream depend
    /// on `id` (an exclusive dependency).
    pub fn exclusive(&mut self, id: u32) {
        if id == 0 {
            return;
        }
        let dep = self.stream(id).dependency;
        for (&other, s) in self.streams.iter_mut() {
            if other != id && s.dependency == dep {
                s.dependency = id;
            }
        }
    }
}

pub struct H2 {
    /// The client or server this connection belongs to.
    pub actor: String,
    pub server: bool,
    pub timeout: Duration,
    writer: Mutex<Stream>,
    st: Mutex<State>,
    cond: Condvar,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// Stream threads started with `-start`, by stream.
    pub threads: Mutex<HashMap<u32, JoinHandle<Step>>>,
    /// The specs of the streams, by stream.
    pub specs: Mutex<HashMap<u32, String>>,
    /// Set when failures are expected: the connection is being torn
    /// down after a failure, or its server is stopping.
    ending: AtomicBool,
    actor_stopping: Option<Arc<AtomicBool>>,
}

impl H2 {
    /// Starts HTTP/2 on a connection: `sock` is the connection, `early`
    /// what was read past the preface.
    pub fn start(
        actor: &str,
        server: bool,
        sock: &Stream,
        early: Vec<u8>,
        timeout: Duration,
        actor_stopping: Option<Arc<AtomicBool>>,
    ) -> Step<Arc<H2>> {
        let clone = |s: &Stream| s.try_clone().map_err(|e| Fail(format!("HTTP/2: {e}")));
        let h2 = Arc::new(H2 {
            actor: actor.to_string(),
            server,
            timeout,
            writer: Mutex::new(clone(sock)?),
            st: Mutex::new(State {
                streams: HashMap::new(),
                wanted: 0,
                running: true,
                dead: None,
                win_self: Window {
                    init: 0xffff,
                    size: 0xffff,
                },
                win_peer: Window {
                    init: 0xffff,
                    size: 0xffff,
                },
                dec: Table::new(4096),
                enc: Table::new(4096),
                last_stream: None,
            }),
            cond: Condvar::new(),
            reader: Mutex::new(None),
            threads: Mutex::new(HashMap::new()),
            specs: Mutex::new(HashMap::new()),
            ending: AtomicBool::new(false),
            actor_stopping,
        });
        let (r, sock) = (h2.clone(), clone(sock)?);
        *lock(&h2.reader) = Some(std::thread::spawn(move || reader(&r, sock, early)));
        Ok(h2)
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.st)
    }

    /// Whether a failure now is an expected consequence of an end.
    pub fn ending(&self) -> bool {
        self.ending.load(Ordering::SeqCst)
            || self
                .actor_stopping
                .as_ref()
                .is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// The stream `name` names (a number, or `next`: two past the last
    /// made, or 1), made if new.
    pub fn stream_id(&self, name: &str) -> Step<u32> {
        let mut st = self.state();
        let id = if name == "next" {
            match st.last_stream {
                Some(last) if last > 0 => last + 2,
                _ => 1,
            }
        } else {
            super::parse_u32(name).ok_or_else(|| {
                Fail(format!(
                    "stream takes an integer as argument (found {name})"
                ))
            })?
        };
        if id >> 31 != 0 {
            fail!("Stream id must be a 31-bits integer (found {name})");
        }
        if !st.streams.contains_key(&id) {
            let (ws, wp) = (st.win_self.init, st.win_peer.init);
            st.streams.insert(
                id,
                StreamState {
                    queue: VecDeque::new(),
                    wanting: false,
                    win_self: ws,
                    win_peer: wp,
                    req: Vec::new(),
                    resp: Vec::new(),
                    body: Vec::new(),
                    weight: 16,
                    dependency: 0,
                    frame: None,
                },
            );
            st.last_stream = Some(id);
            // The reader may be waiting for this stream.
            self.cond.notify_all();
        }
        Ok(id)
    }

    /// Writes one frame.
    pub fn send(&self, who: &str, id: u32, kind: u8, flags: u8, payload: &[u8]) -> Step {
        log_tx(who, id, kind, flags, payload.len());
        if kind == frame::DATA {
            let mut st = self.state();
            let n = payload.len() as i64;
            st.win_peer.size -= n;
            if let Some(s) = st.streams.get_mut(&id) {
                s.win_peer -= n;
            }
        }
        self.send_raw(&frame::encode(kind, flags, id, payload))
    }

    /// Writes one frame whose payload `build` makes under the state's
    /// lock, with the socket held from building to writing, so that
    /// header blocks reach the peer in the order their encoding assumed.
    pub fn send_built(
        &self,
        who: &str,
        id: u32,
        kind: u8,
        flags: u8,
        build: impl FnOnce(&mut State) -> Step<Vec<u8>>,
    ) -> Step {
        let mut w = lock(&self.writer);
        let payload = build(&mut self.state())?;
        log_tx(who, id, kind, flags, payload.len());
        w.write_all(&frame::encode(kind, flags, id, &payload))
            .map_err(|e| Fail(format!("Write failed: {e}")))
    }

    /// Writes bytes as they are.
    pub fn send_raw(&self, data: &[u8]) -> Step {
        lock(&self.writer)
            .write_all(data)
            .map_err(|e| Fail(format!("Write failed: {e}")))
    }

    /// Takes the next frame of stream `id`, waiting for the reader.
    pub fn rx(&self, id: u32) -> Step<Frame> {
        let mut st = self.state();
        loop {
            if let Some(f) = st.stream(id).queue.pop_front() {
                return Ok(f);
            }
            if let Some(why) = &st.dead {
                return Err(Fail(why.clone()));
            }
            if !st.running {
                fail!("HTTP/2 connection ended");
            }
            if !st.stream(id).wanting {
                st.stream(id).wanting = true;
                st.wanted += 1;
                self.cond.notify_all();
            }
            st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn die(&self, why: String) {
        let mut st = self.state();
        if st.dead.is_none() {
            log(3, &self.actor, &why);
            st.dead = Some(why);
        }
        self.cond.notify_all();
    }

    /// Ends the connection: waits for the started streams (after a
    /// failure, makes them fail first), then stops the reader.
    pub fn stop(&self, failed: bool) {
        if failed {
            self.ending.store(true, Ordering::SeqCst);
            self.die("HTTP/2 connection ended by a failure".to_string());
        }
        let threads: Vec<JoinHandle<Step>> = lock(&self.threads).drain().map(|(_, t)| t).collect();
        for t in threads {
            let _ = t.join();
        }
        self.ending.store(true, Ordering::SeqCst);
        self.state().running = false;
        self.cond.notify_all();
        if let Some(r) = lock(&self.reader).take() {
            let _ = r.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads exactly `n` bytes; `Ok(None)` when the connection is stopped.
fn read_n(
    h2: &H2,
    sock: &mut Stream,
    buf: &mut Vec<u8>,
    n: usize,
) -> Result<Option<Vec<u8>>, String> {
    let deadline = Instant::now() + h2.timeout;
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut chunk = [0u8; 16384];
    while buf.len() < n {
        if !h2.state().running {
            return Ok(None);
        }
        match sock.read(&mut chunk) {
            Ok(0) => return Err(format!("HTTP2 rx EOF (read: {} of {n})", buf.len())),
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                if Instant::now() >= deadline {
                    return Err(format!("HTTP2 rx timeout ({} ms)", h2.timeout.as_millis()));
                }
            }
            Err(e) => return Err(format!("HTTP2 rx failed ({e})")),
        }
    }
    Ok(Some(buf.drain(..n).collect()))
}

/// A header block being received: its stream, whether it is a request,
/// and the fragments so far.
struct Block {
    stream: u32,
    request: bool,
    data: Vec<u8>,
}

fn reader(h2: &H2, mut sock: Stream, mut buf: Vec<u8>) {
    let mut block: Option<Block> = None;
    loop {
        {
            let mut st = h2.state();
            while st.running && st.wanted == 0 {
                st = h2.cond.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if !st.running {
                return;
            }
        }
        let head = match read_n(h2, &mut sock, &mut buf, 9) {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => return h2.die(format!("could not get frame header: {e}")),
        };
        let mut h = [0u8; 9];
        h.copy_from_slice(&head);
        let (len, kind, flags, id) = frame::read_header(&h);
        log(
            3,
            &h2.actor,
            &format!(
                "rx: stream: {id}, type: {} ({kind}), flags: 0x{flags:02x}, size: {len}",
                frame::type_name(kind)
            ),
        );
        for f in frame::explain_flags(kind, flags) {
            log(3, &h2.actor, &format!("flag: {f}"));
        }
        let payload = match read_n(h2, &mut sock, &mut buf, len) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => return h2.die(format!("could not get frame body: {e}")),
        };
        let meta = match frame::parse(kind, flags, id, &payload) {
            Ok(m) => m,
            Err(e) => return h2.die(format!("stream {id}: {e}")),
        };
        let mut st = h2.state();
        let mut said = false;
        while !st.streams.contains_key(&id) {
            if !st.running {
                return;
            }
            if !said {
                log(3, &h2.actor, &format!("waiting for stream {id} to exist"));
                said = true;
            }
            st = h2.cond.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(b) = &block {
            if kind != frame::CONTINUATION || b.stream != id {
                let why = format!("Expected CONTINUATION frame for stream {}", b.stream);
                drop(st);
                return h2.die(why);
            }
        }
        if kind > frame::CONTINUATION {
            log(
                3,
                &h2.actor,
                &format!("ignoring a frame of unknown type {kind}"),
            );
            continue;
        }
        if let Err(e) = absorb(h2, &mut st, &mut block, id, flags, kind, &meta) {
            drop(st);
            return h2.die(format!("stream {id}: {e}"));
        }
        let s = st.stream(id);
        s.queue.push_back(Frame {
            kind,
            flags,
            stream: id,
            payload,
            meta,
        });
        if s.wanting {
            s.wanting = false;
            st.wanted -= 1;
        }
        h2.cond.notify_all();
    }
}

/// What the reader does with a frame before queueing it: the body, the
/// windows, header blocks, priorities, the encoder's table size.
fn absorb(
    h2: &H2,
    st: &mut State,
    block: &mut Option<Block>,
    id: u32,
    flags: u8,
    kind: u8,
    meta: &Meta,
) -> Result<(), String> {
    let who = &h2.actor;
    match meta {
        Meta::Data { padding, data } => {
            if flags & frame::PADDED != 0 {
                log(4, who, &format!("padding: {padding:3}"));
            }
            let n = data.len() as i64;
            if id != 0 {
                st.stream(id).win_self -= n;
            }
            st.win_self.size -= n;
            st.stream(id).body.extend_from_slice(data);
        }
        Meta::Headers {
            priority,
            block: fragment,
            ..
        } => {
            if kind != frame::CONTINUATION {
                if let Some((dep, exclusive, weight)) = *priority {
                    let s = st.stream(id);
                    s.dependency = dep;
                    s.weight = weight;
                    log(4, who, &format!("stream->dependency: {dep}"));
                    log(4, who, &format!("stream->weight: {weight}"));
                    if exclusive {
                        st.exclusive(id);
                    }
                }
                let request = kind == frame::PUSH_PROMISE || h2.server;
                let s = st.stream(id);
                if request {
                    s.req.clear();
                } else {
                    s.resp.clear();
                }
                *block = Some(Block {
                    stream: id,
                    request,
                    data: Vec::new(),
                });
            }
            let Some(b) = block.as_mut() else {
                return Err("CONTINUATION frame without a header block to continue".into());
            };
            b.data.extend_from_slice(fragment);
            if flags & frame::END_HEADERS != 0 {
                let b = block.take().expect("just seen");
                let fields = hpack::decode(&mut st.dec, &b.data)
                    .map_err(|e| format!("Header decoding failed: {e}"))?;
                let fields: Vec<(String, String)> = fields
                    .into_iter()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(&n).into_owned(),
                            String::from_utf8_lossy(&v).into_owned(),
                        )
                    })
                    .collect();
                for (i, (n, v)) in fields.iter().enumerate() {
                    log(4, who, &format!("header[{i:2}]: {n}: {v}"));
                }
                let s = st.stream(id);
                if b.request {
                    s.req = fields;
                } else {
                    s.resp = fields;
                }
            }
        }
        Meta::Priority {
            stream,
            exclusive,
            weight,
        } => {
            let s = st.stream(id);
            s.dependency = *stream;
            s.weight = *weight;
            if *exclusive {
                st.exclusive(id);
            }
            log(3, who, &format!("prio->stream: {stream}"));
            log(3, who, &format!("prio->weight: {weight}"));
        }
        Meta::Rst { err } => {
            log(
                4,
                who,
                &format!("rst->err: {} ({err})", frame::error_name(*err)),
            );
        }
        Meta::Settings { values } => {
            for (i, v) in values.iter().enumerate() {
                if let Some(v) = v {
                    log(
                        4,
                        who,
                        &format!("settings->{} ({i}): {v}", frame::SETTING_NAMES[i]),
                    );
                }
            }
            if let Some(size) = values[1] {
                st.enc.resize(size as usize);
            }
        }
        Meta::Ping { data } => {
            log(
                4,
                who,
                &format!("ping->data: {}", String::from_utf8_lossy(data)),
            );
        }
        Meta::GoAway { last, err, debug } => {
            log(3, who, &format!("goaway->laststream: {last}"));
            log(
                3,
                who,
                &format!("goaway->err: {} ({err})", frame::error_name(*err)),
            );
            if let Some(d) = debug {
                log(
                    3,
                    who,
                    &format!("goaway->debug: {}", String::from_utf8_lossy(d)),
                );
            }
        }
        Meta::WinUp { size } => log(3, who, &format!("winup->size: {size}")),
        Meta::None => {}
    }
    Ok(())
}

/// The trace line of a frame sent.
fn log_tx(who: &str, id: u32, kind: u8, flags: u8, len: usize) {
    log(
        3,
        who,
        &format!(
            "tx: stream: {id}, type: {} ({kind}), flags: 0x{flags:02x}, size: {len}",
            frame::type_name(kind)
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn pair() -> (Arc<H2>, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        let h2 = H2::start(
            "t",
            false,
            &Stream::Unix(a),
            Vec::new(),
            Duration::from_secs(5),
            None,
        )
        .unwrap();
        (h2, b)
    }

    #[test]
    fn frames_reach_their_stream_and_headers_are_decoded() {
        let (h2, mut peer) = pair();
        let (s0, s1) = (h2.stream_id("0").unwrap(), h2.stream_id("next").unwrap());
        assert_eq!((s0, s1), (0, 1));
        assert_eq!(h2.stream_id("next").unwrap(), 3);
        // :status 200 indexed, then "x: y" literal, then 5 bytes of body.
        let block = [0x88, 0x00, 0x01, b'x', 0x01, b'y'];
        peer.write_all(&frame::encode(
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &block,
        ))
        .unwrap();
        peer.write_all(&frame::encode(frame::PING, 0, 0, b"12345678"))
            .unwrap();
        peer.write_all(&frame::encode(frame::DATA, frame::END_STREAM, 1, b"hello"))
            .unwrap();
        assert_eq!(h2.rx(1).unwrap().kind, frame::HEADERS);
        assert_eq!(h2.rx(0).unwrap().kind, frame::PING);
        assert_eq!(h2.rx(1).unwrap().kind, frame::DATA);
        let mut st = h2.state();
        let s = st.stream(1);
        assert_eq!(
            s.resp,
            vec![
                (":status".to_string(), "200".to_string()),
                ("x".to_string(), "y".to_string())
            ]
        );
        assert_eq!(s.body, b"hello");
        assert_eq!(s.win_self, 65535 - 5);
        assert_eq!(st.win_self.size, 65535 - 5);
        drop(st);
        h2.stop(false);
    }

    #[test]
    fn a_malformed_frame_fails_the_waiting_stream_with_its_reason() {
        let (h2, mut peer) = pair();
        h2.stream_id("0").unwrap();
        peer.write_all(&frame::encode(frame::PING, 0, 0, b"short"))
            .unwrap();
        let e = h2.rx(0).unwrap_err().0;
        assert!(e.contains("size should be 8"), "{e}");
        h2.stop(false);

        let (h2, mut peer) = pair();
        h2.stream_id("1").unwrap();
        // An index past both tables.
        peer.write_all(&frame::encode(
            frame::HEADERS,
            frame::END_HEADERS,
            1,
            &[0xff, 0x70],
        ))
        .unwrap();
        let e = h2.rx(1).unwrap_err().0;
        assert!(e.contains("Header decoding failed"), "{e}");
        h2.stop(false);

        let (h2, mut peer) = pair();
        h2.stream_id("1").unwrap();
        peer.write_all(&frame::encode(frame::HEADERS, 0, 1, &[0x88]))
            .unwrap();
        peer.write_all(&frame::encode(frame::DATA, 0, 1, b"x"))
            .unwrap();
        let _ = h2.rx(1);
        let e = h2.rx(1).unwrap_err().0;
        assert!(e.contains("Expected CONTINUATION"), "{e}");
        h2.stop(false);

        let (h2, peer) = pair();
        h2.stream_id("1").unwrap();
        drop(peer);
        let e = h2.rx(1).unwrap_err().0;
        assert!(e.contains("EOF"), "{e}");
        h2.stop(false);
    }
}
