//! The management interface (`-T`, `-S`): a TCP listener speaking
//! Varnish's CLI protocol, the challenge-response login, the work-directory
//! file that tells `lacquer adm -n` where to connect, and the "child" —
//! the client listeners — that `start` and `stop` switch on and off.
//! The commands themselves are in `commands`, `vcl_cmds` and `tls_cmds`.

mod backend_list;
mod cluster_cmds;
mod commands;
mod json;
pub(crate) use json::string as json_string;
mod text;
mod tls_cmds;
mod vcl_cmds;

use crate::daemon::listen::Listener;
use crate::Shared;
use lacquer_admin::{frame, new_challenge, status, CommandReader, Input};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The largest command (here documents included) a client may send.
const MAX_COMMAND: usize = 16 << 20;

/// The largest command before the login: `auth` and a 64-digit answer fit
/// many times over; a stranger cannot make the daemon hold more.
const MAX_COMMAND_UNAUTHENTICATED: usize = 4096;

/// A response about to be framed.
pub(crate) struct Reply {
    pub status: u16,
    pub body: String,
    /// Close the connection once it is sent.
    pub close: bool,
}

impl Reply {
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply::with(status::OK, body)
    }

    pub fn with(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            body: body.into(),
            close: false,
        }
    }
}

/// The client listeners, accepting or not.
struct Child {
    listeners: Vec<Listener>,
    accepting: Vec<JoinHandle<()>>,
}

/// The management side of the daemon.
pub(crate) struct Mgmt {
    pub sh: Arc<Shared>,
    /// The secret file's contents; `None` with `-S none`.
    secret: Option<Vec<u8>>,
    child: Mutex<Child>,
    /// The client workers, which accept on the listeners.
    workers: crate::daemon::workers::Workers,
    /// `-r`: parameters `param.set` may not change.
    pub(crate) read_only: Vec<String>,
}

impl Mgmt {
    pub fn new(
        sh: Arc<Shared>,
        secret: Option<Vec<u8>>,
        listeners: Vec<Listener>,
        workers: crate::daemon::workers::Workers,
    ) -> Arc<Mgmt> {
        Arc::new(Mgmt {
            sh,
            secret,
            child: Mutex::new(Child {
                listeners,
                accepting: Vec::new(),
            }),
            workers,
            read_only: Vec::new(),
        })
    }

    /// Makes `names` read-only for `param.set` (`-r`).
    pub fn with_read_only(mut self: Arc<Mgmt>, names: Vec<String>) -> Arc<Mgmt> {
        if let Some(m) = Arc::get_mut(&mut self) {
            m.read_only = names;
        }
        self
    }

    /// Runs the commands of a `-I` file in order. A command written with a
    /// leading `-` may fail; any other failure stops the start.
    pub async fn run_cli_file(self: &Arc<Mgmt>, path: &Path) -> Result<(), String> {
        let text =
            std::fs::read(path).map_err(|e| format!("-I {}: cannot read: {e}", path.display()))?;
        let mut reader = CommandReader::new();
        reader.push(&text);
        if !text.ends_with(b"\n") {
            reader.push(b"\n");
        }
        while let Some(input) = reader.next_input() {
            let mut args = match input {
                Input::Command(args) => args,
                Input::Syntax(e) => return Err(format!("-I {}: {e}", path.display())),
            };
            let may_fail = args[0].starts_with('-');
            if may_fail {
                args[0].remove(0);
            }
            if args[0].is_empty() || args[0].starts_with('#') {
                continue;
            }
            let me = self.clone();
            let shown = args.join(" ");
            let reply = tokio::task::spawn_blocking(move || me.execute(&args))
                .await
                .map_err(|e| format!("-I {}: {e}", path.display()))?;
            {
                // As `say!`, to standard output.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "CLI -I {shown}: {} {}",
                    reply.status,
                    reply.body.trim_end()
                );
            }
            if reply.status != status::OK && !may_fail {
                return Err(format!(
                    "-I {}: \"{shown}\" failed ({}): {}",
                    path.display(),
                    reply.status,
                    reply.body.trim_end()
                ));
            }
        }
        Ok(())
    }

    /// `-M`: connects to `addr` and offers the management interface there
    /// (a reverse shell), connecting again a second after it is lost.
    pub async fn serve_reverse(self: Arc<Mgmt>, addr: String) {
        loop {
            if let Ok(stream) = TcpStream::connect(&addr).await {
                self.clone().session(stream).await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// No program loaded yet (`-d` without `-b`/`-f`).
    pub(crate) fn registry_is_empty(&self) -> bool {
        self.sh
            .vcls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .active
            .is_empty()
    }

    pub fn running(&self) -> bool {
        !self.child().accepting.is_empty()
    }

    /// Starts accepting clients; false if already accepting.
    pub fn start_accepting(&self) -> Result<bool, String> {
        let mut child = self.child();
        if !child.accepting.is_empty() {
            return Ok(false);
        }
        let mut tasks = Vec::new();
        for l in &child.listeners {
            tasks.extend(l.spawn_accepting(&self.sh, &self.workers)?);
        }
        child.accepting = tasks;
        Ok(true)
    }

    /// Stops accepting clients (the sockets stay bound, so the addresses
    /// are kept for `start`); false if not accepting. Connections already
    /// accepted finish their work; the cache is kept.
    pub fn stop(&self) -> bool {
        let mut child = self.child();
        if child.accepting.is_empty() {
            return false;
        }
        for task in child.accepting.drain(..) {
            task.abort();
        }
        true
    }

    /// Serves management connections on `listener` until the process ends.
    pub async fn serve_cli(self: Arc<Mgmt>, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(self.clone().session(stream));
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    }

    async fn session(self: Arc<Mgmt>, mut stream: TcpStream) {
        let mut challenge = None;
        let greeting = match &self.secret {
            None => Reply::ok(commands::banner()),
            Some(_) => match new_challenge() {
                Ok(c) => {
                    let r = Reply::with(status::AUTH, format!("{c}\n\nAuthentication required.\n"));
                    challenge = Some(c);
                    r
                }
                Err(e) => Reply::with(status::CLOSE, format!("No randomness: {e}\n")),
            },
        };
        if self.send(&mut stream, &greeting).await.is_err() || greeting.status == status::CLOSE {
            return;
        }
        let mut reader = CommandReader::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            while let Some(input) = reader.next_input() {
                let reply = match input {
                    Input::Syntax(e) => Reply::with(
                        status::SYNTAX,
                        format!(
                            "Unknown request.\nType 'help' for more info.\nSyntax Error: {e}\n"
                        ),
                    ),
                    Input::Command(args) if challenge.is_some() => {
                        self.unauthenticated(&args, &mut challenge)
                    }
                    Input::Command(args) => {
                        let me = self.clone();
                        tokio::task::spawn_blocking(move || me.execute(&args))
                            .await
                            .unwrap_or_else(|e| {
                                Reply::with(status::CANT, format!("Command failed: {e}\n"))
                            })
                    }
                };
                if self.send(&mut stream, &reply).await.is_err() || reply.close {
                    return;
                }
            }
            let limit = if challenge.is_some() {
                MAX_COMMAND_UNAUTHENTICATED
            } else {
                MAX_COMMAND
            };
            if reader.pending() > limit {
                let r = Reply::with(status::COMMS, "Command too long\n");
                let _ = self.send(&mut stream, &r).await;
                return;
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => reader.push(&buf[..n]),
            }
        }
    }

    /// Before the login only `auth`, `ping` and `quit` are known.
    fn unauthenticated(&self, args: &[String], challenge: &mut Option<String>) -> Reply {
        match args[0].as_str() {
            "auth" if args.len() == 2 => {
                let expected = lacquer_admin::auth_response(
                    challenge.as_deref().unwrap_or(""),
                    self.secret.as_deref().unwrap_or(b""),
                );
                if constant_time_eq(expected.as_bytes(), args[1].as_bytes()) {
                    *challenge = None;
                    Reply::ok(commands::banner())
                } else {
                    Reply {
                        status: status::CLOSE,
                        body: String::new(),
                        close: true,
                    }
                }
            }
            "ping" | "quit" => self.execute(args),
            _ => commands::unknown(),
        }
    }

    async fn send(&self, stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
        let limit = self.sh.params.cli_limit() as usize;
        let bytes = if reply.body.len() > limit {
            let mut end = limit;
            while !reply.body.is_char_boundary(end) {
                end -= 1;
            }
            frame(status::TRUNCATED, &reply.body[..end])
        } else {
            frame(reply.status, &reply.body)
        };
        stream.write_all(&bytes).await
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the `-S` file, or makes `_.secret` in the work directory.
pub(crate) fn load_secret(
    spec: &crate::daemon::config::SecretSpec,
    workdir: &Path,
) -> Result<(Option<Vec<u8>>, Option<std::path::PathBuf>), String> {
    use crate::daemon::config::SecretSpec;
    match spec {
        SecretSpec::Disabled => Ok((None, None)),
        SecretSpec::File(path) => std::fs::read(path)
            .map(|s| (Some(s), Some(path.clone())))
            .map_err(|e| format!("Cannot open -S file ({}): {e}", path.display())),
        SecretSpec::Generate => {
            let path = workdir.join("_.secret");
            let random = lacquer_admin::random_bytes(32)
                .map_err(|e| format!("Cannot read random bytes for the secret: {e}"))?;
            let mut text: String = random.iter().map(|b| format!("{b:02x}")).collect();
            text.push('\n');
            write_private(&path, text.as_bytes())
                .map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
            Ok((Some(text.into_bytes()), Some(path)))
        }
    }
}

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

/// The file `lacquer adm -n` reads: one `T host port` line per management
/// address and an `S path` line (`S none` without authentication).
pub(crate) const ADDRESS_FILE: &str = "_.mgmt";

pub(crate) fn write_address_file(
    workdir: &Path,
    addrs: &[SocketAddr],
    secret: Option<&Path>,
) -> Result<(), String> {
    let mut text = String::new();
    for a in addrs {
        text.push_str(&format!("T {} {}\n", a.ip(), a.port()));
    }
    match secret {
        Some(p) => text.push_str(&format!("S {}\n", p.display())),
        None => text.push_str("S none\n"),
    }
    let path = workdir.join(ADDRESS_FILE);
    std::fs::write(&path, text).map_err(|e| format!("Cannot write {}: {e}", path.display()))
}
