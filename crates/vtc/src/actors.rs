//! Servers (`server sN`), which play the backends, and clients (`client
//! cN`), which play the users: each runs its spec in a thread of its own
//! on the connections it accepts or opens.

use crate::fail;
use crate::http::Conn;
use crate::net::{Listener, Stream};
use crate::session::Session;
use crate::state::World;
use crate::trace::{fatal, log, Fail, Step};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a spec thread does when its spec fails.
fn ended(actor: &str, non_fatal: bool, result: Step, stopping: &AtomicBool) {
    if let Err(Fail(msg)) = result {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        if non_fatal {
            log(1, actor, &format!("Failure ignored (non_fatal): {msg}"));
        } else {
            fatal(actor, &msg);
        }
    }
}

/// Where a server listens and how it serves.
pub struct Server {
    pub name: String,
    pub spec: String,
    pub listen: String,
    pub repeat: u64,
    pub keepalive: bool,
    pub dispatch: bool,
    /// `-rcvbuf`: the receive buffer of each connection it accepts.
    pub rcvbuf: Option<usize>,
    listener: Option<Arc<Listener>>,
    thread: Option<JoinHandle<()>>,
    stopping: Arc<AtomicBool>,
    /// The connection being served, so that a stop can end it.
    current: Arc<Mutex<Option<Stream>>>,
}

impl Server {
    pub fn new(name: &str) -> Server {
        Server {
            name: name.to_string(),
            spec: String::new(),
            listen: "127.0.0.1:0".to_string(),
            repeat: 1,
            keepalive: false,
            dispatch: false,
            rcvbuf: None,
            listener: None,
            thread: None,
            stopping: Arc::new(AtomicBool::new(false)),
            current: Arc::new(Mutex::new(None)),
        }
    }

    /// Binds (once) and defines `${sN_addr}`, `${sN_port}`, `${sN_sock}`.
    pub fn bind(&mut self, world: &World) -> Step {
        if self.listener.is_some() {
            return Ok(());
        }
        let listen = world.macros.expand(&self.listen)?;
        let l = Listener::bind(&listen).map_err(|e| {
            Fail(format!(
                "Server listen address ({listen}) cannot be bound: {e}"
            ))
        })?;
        let (addr, port) = l.endpoint().map_err(|e| Fail(e.to_string()))?;
        world.macros.define_endpoint(&self.name, &addr, &port);
        log(1, &self.name, &format!("Listen on {addr} {port}"));
        self.listener = Some(Arc::new(l));
        Ok(())
    }

    /// The address and port (`-` for a Unix socket), for `-vcl+backend`.
    pub fn endpoint(&self) -> Option<(String, String)> {
        self.listener.as_ref().and_then(|l| l.endpoint().ok())
    }

    pub fn start(&mut self, world: &Arc<World>) -> Step {
        if self.thread.is_some() {
            fail!("Server {} already running", self.name);
        }
        self.bind(world)?;
        log(2, &self.name, "Starting server");
        let listener = self.listener.clone().expect("bound above");
        let (world, name, spec) = (world.clone(), self.name.clone(), self.spec.clone());
        let (repeat, keepalive, dispatch) = (self.repeat, self.keepalive, self.dispatch);
        let stopping = self.stopping.clone();
        stopping.store(false, Ordering::SeqCst);
        let current = self.current.clone();
        let rcvbuf = self.rcvbuf;
        log(
            2,
            &self.name,
            &format!(
                "Started on {} ({repeat} iterations)",
                self.endpoint()
                    .map(|(a, p)| format!("{a} {p}"))
                    .unwrap_or_default()
            ),
        );
        self.thread = Some(std::thread::spawn(move || {
            let timeout = world.http_timeout;
            let accept = |l: &Listener| -> Option<Stream> {
                match l.accept() {
                    Ok((s, peer)) => {
                        if let Some(size) = rcvbuf {
                            let _ = s.set_rcvbuf(size);
                        }
                        log(3, &name, &format!("accepted fd {} {peer}", s.as_raw_fd()));
                        *current.lock().unwrap_or_else(|p| p.into_inner()) = s.try_clone().ok();
                        Some(s)
                    }
                    Err(e) => {
                        if !stopping.load(Ordering::SeqCst) {
                            fatal(&name, &format!("Accept failed: {e}"));
                        }
                        None
                    }
                }
            };
            if dispatch {
                let mut n = 0;
                while let Some(stream) = accept(&listener) {
                    n += 1;
                    let actor = format!("{name}{n}");
                    let (world, spec, stopping) = (world.clone(), spec.clone(), stopping.clone());
                    std::thread::spawn(move || {
                        let mut s = Session {
                            world: world.clone(),
                            actor: actor.clone(),
                            listener: None,
                            server: true,
                            non_fatal: false,
                            gzip_level: 0,
                            gzip_residual: None,
                            stopping: Some(stopping.clone()),
                        };
                        let mut conn = Conn::new(&actor, stream, timeout);
                        let r = s.run_text(&mut conn, &spec);
                        // Closed now: the clone kept for stopping must
                        // not hold it open.
                        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                        ended(&actor, s.non_fatal, r, &stopping);
                    });
                }
                return;
            }
            let rounds = if keepalive { 1 } else { repeat };
            for _ in 0..rounds {
                let Some(stream) = accept(&listener) else {
                    return;
                };
                let mut s = Session {
                    world: world.clone(),
                    actor: name.clone(),
                    listener: Some(&listener),
                    server: true,
                    non_fatal: false,
                    gzip_level: 0,
                    gzip_residual: None,
                    stopping: Some(stopping.clone()),
                };
                let mut conn = Conn::new(&name, stream, timeout);
                let times = if keepalive { repeat } else { 1 };
                let mut r = Ok(());
                for _ in 0..times {
                    r = s.run_text(&mut conn, &spec);
                    if r.is_err() {
                        break;
                    }
                }
                log(3, &name, "shutting fd");
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                ended(&name, s.non_fatal, r, &stopping);
            }
            log(2, &name, "Ending");
        }));
        Ok(())
    }

    /// Waits for the server's spec to finish.
    pub fn wait(&mut self) {
        if let Some(t) = self.thread.take() {
            log(2, &self.name, "Waiting for server");
            let _ = t.join();
        }
    }

    /// Stops the server wherever it is: waiting for a connection or
    /// serving one.
    pub fn stop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(l) = &self.listener {
            // Shutting the listening socket down wakes a thread blocked in
            // accept on it.
            l.shutdown();
        }
        if let Some(s) = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.wait();
        self.listener = None;
    }
}

/// A client: where it connects and how often.
pub struct Client {
    pub name: String,
    pub spec: String,
    pub connect: String,
    pub repeat: u64,
    pub keepalive: bool,
    /// `-rcvbuf`: its connection's receive buffer (`SO_RCVBUF`).
    pub rcvbuf: Option<usize>,
    /// `-proxy1`/`-proxy2`: the version and "CLIENT:PORT SERVER:PORT [TLV…]".
    pub proxy: Option<(u8, String)>,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    pub fn new(name: &str) -> Client {
        Client {
            name: name.to_string(),
            spec: String::new(),
            connect: "${v1_sock}".to_string(),
            repeat: 1,
            keepalive: false,
            rcvbuf: None,
            proxy: None,
            thread: None,
        }
    }

    pub fn start(&mut self, world: &Arc<World>) -> Step {
        if self.thread.is_some() {
            fail!("Client {} already running", self.name);
        }
        let addr = world.macros.expand(&self.connect)?;
        log(2, &self.name, "Starting client");
        let (world, name, spec) = (world.clone(), self.name.clone(), self.spec.clone());
        let (repeat, keepalive, rcvbuf) = (self.repeat, self.keepalive, self.rcvbuf);
        let proxy = match &self.proxy {
            Some((version, spec)) => Some(crate::net::proxy_header(
                *version,
                &world.macros.expand(spec)?,
            )?),
            None => None,
        };
        log(
            2,
            &name,
            &format!("Started on {addr} ({repeat} iterations)"),
        );
        self.thread = Some(std::thread::spawn(move || {
            let stopping = AtomicBool::new(false);
            let connect = || -> Step<Conn> {
                log(3, &name, &format!("Connect to {addr}"));
                let s = Stream::connect(&addr)
                    .map_err(|e| Fail(format!("Failed to open {addr}: {e}")))?;
                if let Some(size) = rcvbuf {
                    s.set_rcvbuf(size)
                        .map_err(|e| Fail(format!("-rcvbuf {size}: {e}")))?;
                }
                log(
                    3,
                    &name,
                    &format!("connected fd {} {}", s.as_raw_fd(), s.describe()),
                );
                let mut conn = Conn::new(&name, s, world.http_timeout);
                if let Some(header) = &proxy {
                    conn.send("proxy", header)?;
                }
                Ok(conn)
            };
            let mut s = Session {
                world: world.clone(),
                actor: name.clone(),
                listener: None,
                server: false,
                non_fatal: false,
                gzip_level: 0,
                gzip_residual: None,
                stopping: None,
            };
            let rounds = if keepalive { 1 } else { repeat };
            for _ in 0..rounds {
                let r = connect().and_then(|mut conn| {
                    let times = if keepalive { repeat } else { 1 };
                    for _ in 0..times {
                        s.run_text(&mut conn, &spec)?;
                    }
                    log(3, &name, "closing fd");
                    Ok(())
                });
                let failed = r.is_err();
                ended(&name, s.non_fatal, r, &stopping);
                if failed {
                    break;
                }
            }
            log(2, &name, "Ending");
        }));
        Ok(())
    }

    pub fn wait(&mut self) {
        if let Some(t) = self.thread.take() {
            log(2, &self.name, "Waiting for client");
            let _ = t.join();
        }
    }
}
