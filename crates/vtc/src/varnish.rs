//! `varnish vN`: a real `lacquer serve` started as a subprocess in its own
//! work directory, driven the way varnishtest drives varnishd: started
//! stopped (`-d`), programs loaded with `vcl.inline` and made active with
//! `vcl.use` through the management CLI, then `start`.

use crate::fail;
use crate::state::World;
use crate::trace::{log, Fail, Step};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The management connection.
struct Cli {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Cli {
    fn connect(addr: &str, secret: Option<&[u8]>, timeout: Duration) -> Step<(Cli, u32, String)> {
        let stream = TcpStream::connect(addr)
            .map_err(|e| Fail(format!("CLI connect to {addr} failed: {e}")))?;
        let _ = stream.set_read_timeout(Some(timeout));
        let reader = BufReader::new(stream.try_clone().map_err(|e| Fail(e.to_string()))?);
        let mut cli = Cli { stream, reader };
        let (mut status, mut body) = cli.read()?;
        if status == 107 {
            let Some(secret) = secret else {
                fail!("CLI wants authentication and there is no secret");
            };
            let challenge = body.lines().next().unwrap_or("").to_string();
            let mut h = Sha256::new();
            h.update(challenge.as_bytes());
            h.update(b"\n");
            h.update(secret);
            h.update(challenge.as_bytes());
            h.update(b"\n");
            let answer: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            (status, body) = cli.send(&format!("auth {answer}"))?;
        }
        Ok((cli, status, body))
    }

    fn read(&mut self) -> Step<(u32, String)> {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .map_err(|e| Fail(format!("CLI read failed: {e}")))?;
        let mut parts = line.split_whitespace();
        let (Some(Ok(status)), Some(Ok(len))) = (
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<usize>),
        ) else {
            fail!("CLI: bad response line \"{}\"", line.trim_end());
        };
        let mut body = vec![0u8; len + 1];
        self.reader
            .read_exact(&mut body)
            .map_err(|e| Fail(format!("CLI read failed: {e}")))?;
        body.pop();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    fn send(&mut self, cmd: &str) -> Step<(u32, String)> {
        self.stream
            .write_all(format!("{cmd}\n").as_bytes())
            .map_err(|e| Fail(format!("CLI write failed: {e}")))?;
        self.read()
    }
}

pub struct Varnish {
    pub name: String,
    workdir: PathBuf,
    args: Vec<String>,
    child: Option<Arc<Mutex<Child>>>,
    cli: Option<Cli>,
    /// `Listen name ip port` lines the daemon printed.
    listens: Arc<Mutex<Vec<(String, String, String)>>>,
    vcls: usize,
    syntax: String,
    /// The `-j` argument (`-jail`).
    jail: String,
}

const HEREDOC: &str = "%XJEIFLH|)Xspa8P";

impl Varnish {
    pub fn new(name: &str, world: &World) -> Varnish {
        let workdir = world.tmpdir.join(name);
        world
            .macros
            .define(&format!("{name}_name"), &workdir.display().to_string());
        Varnish {
            name: name.to_string(),
            workdir,
            args: Vec::new(),
            child: None,
            cli: None,
            listens: Arc::new(Mutex::new(Vec::new())),
            vcls: 0,
            syntax: "4.1".to_string(),
            jail: "-jnone".to_string(),
        }
    }

    pub fn arg(&mut self, a: &str) -> Step {
        if self.child.is_some() {
            fail!("-arg must come before the instance is launched");
        }
        self.args.extend(a.split_whitespace().map(str::to_string));
        Ok(())
    }

    /// `-jail`: the `-j` argument the daemon starts with (varnishtest's
    /// default keeps the user who runs the test).
    pub fn jail(&mut self, j: &str) -> Step {
        if self.child.is_some() {
            fail!("-jail must come before the instance is launched");
        }
        self.jail = j.to_string();
        Ok(())
    }

    pub fn syntax(&mut self, v: &str) {
        self.syntax = v.to_string();
    }

    /// Starts the daemon (stopped, no program) and logs in to its CLI.
    fn launch(&mut self, world: &World) -> Step {
        if self.child.is_some() {
            return Ok(());
        }
        log(2, &self.name, "Launch");
        let _ = std::fs::create_dir_all(&self.workdir);
        let mut cmd = Command::new(&world.exe);
        // varnishtest listens on a port of its choosing unless the test
        // gives its own -a.
        let own_listen = self.args.iter().any(|a| a == "-a" || a.starts_with("-a"));
        cmd.arg("serve")
            .arg("-d")
            .arg("-n")
            .arg(&self.workdir)
            .arg(&self.jail)
            .args(["-T", "127.0.0.1:0"])
            // Debug records logged, as varnishtest has varnishd log them.
            .args(["-p", "vsl_mask=+Debug"])
            .args(if own_listen {
                &[][..]
            } else {
                &["-a", "127.0.0.1:0"][..]
            })
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        log(3, &self.name, &format!("CMD: {cmd:?}"));
        let mut child = cmd
            .spawn()
            .map_err(|e| Fail(format!("Cannot start {}: {e}", world.exe.display())))?;
        log(3, &self.name, &format!("PID: {}", child.id()));
        world
            .macros
            .define(&format!("{}_pid", self.name), &child.id().to_string());
        let (tx, rx) = mpsc::channel::<String>();
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        let (name, listens) = (self.name.clone(), self.listens.clone());
        std::thread::spawn(move || {
            // The management address is used once the daemon says it is
            // up (the work directory's files are written by then).
            let mut mgmt = None;
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                log(3, &name, &format!("debug|{line}"));
                let parts: Vec<&str> = line.split(' ').collect();
                match parts.as_slice() {
                    ["Listen", n, ip, port] => listens
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((n.to_string(), ip.to_string(), port.to_string())),
                    ["Management", ip, port] if mgmt.is_none() => {
                        mgmt = Some(format!("{ip}:{port}"));
                    }
                    ["Child", "launched", "OK"] => {
                        if let Some(addr) = mgmt.take() {
                            let _ = tx.send(addr);
                        }
                    }
                    _ => {}
                }
            }
        });
        let name = self.name.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                log(3, &name, &format!("debug|{line}"));
            }
        });
        let child = Arc::new(Mutex::new(child));
        let for_cleanup = child.clone();
        crate::trace::on_failure(Box::new(move || {
            let mut c = for_cleanup.lock().unwrap_or_else(|p| p.into_inner());
            let _ = c.kill();
            let _ = c.wait();
        }));
        self.child = Some(child);
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .map_err(|_| Fail("The daemon did not open its management interface".into()))?;
        let mgmt = std::fs::read_to_string(self.workdir.join("_.mgmt")).unwrap_or_default();
        let secret = match mgmt.lines().find_map(|l| l.strip_prefix("S ")) {
            Some("none") | None => None,
            Some(path) => Some(
                std::fs::read(path).map_err(|e| Fail(format!("Cannot read secret {path}: {e}")))?,
            ),
        };
        let (cli, status, _) = Cli::connect(&addr, secret.as_deref(), world.http_timeout)?;
        log(
            3,
            &self.name,
            &format!("CLI connection to {addr}: {status}"),
        );
        if status != 200 {
            fail!("CLI authentication failed ({status})");
        }
        self.cli = Some(cli);
        Ok(())
    }

    /// Sends one command; returns status and body.
    pub fn cli(&mut self, world: &World, cmd: &str) -> Step<(u32, String)> {
        self.launch(world)?;
        // As varnishtest: macros expand in a command, braced or not.
        let cmd = &world.macros.expand(cmd)?;
        let cli = self.cli.as_mut().expect("launched");
        for l in cmd.lines() {
            log(4, &self.name, &format!("CLI TX|{l}"));
        }
        let (status, body) = cli.send(cmd)?;
        log(3, &self.name, &format!("CLI RX  {status}"));
        for l in body.lines() {
            log(4, &self.name, &format!("CLI RX|{l}"));
        }
        Ok((status, body))
    }

    /// The program text varnishtest would load: the version line, one
    /// backend per server for `-vcl+backend`, then the test's text.
    pub fn vcl_text(
        &self,
        world: &World,
        spec: &str,
        backends: &[(String, (String, String))],
    ) -> Step<String> {
        let mut text = format!("vcl {};\n", self.syntax);
        for (name, (addr, port)) in backends {
            if port == "-" {
                text.push_str(&format!("backend {name} {{ .path = \"{addr}\"; }}\n"));
            } else {
                text.push_str(&format!(
                    "backend {name} {{ .host = \"{addr}\"; .port = \"{port}\"; }}\n"
                ));
            }
        }
        text.push('\n');
        text.push_str(&world.macros.expand(spec)?);
        text.push('\n');
        Ok(text)
    }

    /// Loads a program and makes it active.
    pub fn load_vcl(&mut self, world: &World, text: &str) -> Step {
        self.vcls += 1;
        let name = format!("vcl{}", self.vcls);
        let (status, body) = self.cli(
            world,
            &format!("vcl.inline {name} << {HEREDOC}\n{text}\n{HEREDOC}"),
        )?;
        if status != 200 {
            fail!("VCL compilation failed (status {status}):\n{body}");
        }
        let (status, body) = self.cli(world, &format!("vcl.use {name}"))?;
        if status != 200 {
            fail!("vcl.use {name} failed ({status}): {body}");
        }
        Ok(())
    }

    /// Loads a program that must fail to compile with `expected` in the
    /// message.
    pub fn err_vcl(&mut self, world: &World, expected: &str, text: &str) -> Step {
        self.vcls += 1;
        let name = format!("vcl{}", self.vcls);
        let (status, body) = self.cli(
            world,
            &format!("vcl.inline {name} << {HEREDOC}\n{text}\n{HEREDOC}"),
        )?;
        if status == 200 {
            fail!("VCL compilation succeeded, expected failure");
        }
        log(2, &self.name, "VCL compilation failed (as expected)");
        if !body.contains(expected) {
            fail!("Did not find expected string: (\"{expected}\")");
        }
        log(
            3,
            &self.name,
            &format!("Found expected string: (\"{expected}\")"),
        );
        Ok(())
    }

    /// `start`, then the listen address macros. Transaction ids start at
    /// 1000, as varnishtest arranges, so log expectations can name them.
    pub fn start(&mut self, world: &World) -> Step {
        log(2, &self.name, "Start");
        let (status, body) = self.cli(world, "debug.xid 1000")?;
        if status != 200 {
            fail!("debug.xid failed ({status}): {body}");
        }
        let (status, body) = self.cli(world, "start")?;
        if status != 200 {
            fail!("Start failed ({status}): {body}");
        }
        let listens = self
            .listens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (i, (lname, ip, port)) in listens.iter().enumerate() {
            if i == 0 {
                log(2, &self.name, &format!("Listen on {ip} {port}"));
                world.macros.define_endpoint(&self.name, ip, port);
            }
            let named = format!("{}_{lname}", self.name);
            world.macros.define_endpoint(&named, ip, port);
        }
        Ok(())
    }

    pub fn stop(&mut self, world: &World) -> Step {
        log(2, &self.name, "Stop");
        let (status, body) = self.cli(world, "stop")?;
        if status != 200 {
            fail!("Stop failed ({status}): {body}");
        }
        Ok(())
    }

    /// `-expect COUNTER OP VALUE`: read from the counters segment, and
    /// read again for up to 5 seconds until it holds (counters are
    /// published a little after they change). `MAIN.` is implied; `*` and
    /// `?` glob, and must name exactly one counter; VALUE may be another
    /// counter.
    /// `-vsc PATTERN`: logs every counter whose name matches, with its
    /// value, as varnishtest dumps them.
    pub fn dump_counters(&mut self, world: &World, pattern: &str) -> Step {
        self.launch(world)?;
        let all = lacquer_shm::counters::read(&self.workdir).map_err(|e| Fail(e.to_string()))?;
        for r in all
            .iter()
            .filter(|r| lacquer_core::glob::matches(pattern, &r.name))
        {
            log(4, &self.name, &format!("VSC {} {}", r.name, r.value));
        }
        Ok(())
    }

    pub fn expect_counter(&mut self, world: &World, name: &str, op: &str, value: &str) -> Step {
        self.launch(world)?;
        let full = |n: &str| {
            if n.contains('.') {
                n.to_string()
            } else {
                format!("MAIN.{n}")
            }
        };
        let lookup = |all: &[lacquer_shm::counters::Reading], n: &str| -> Step<Option<u64>> {
            let pattern = full(n);
            let found: Vec<&lacquer_shm::counters::Reading> = all
                .iter()
                .filter(|r| lacquer_core::glob::matches(&pattern, &r.name))
                .collect();
            match found.as_slice() {
                [] => Ok(None),
                [one] => Ok(Some(one.value)),
                _ => fail!("-expect {n}: more than one counter matches"),
            }
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let all =
                lacquer_shm::counters::read(&self.workdir).map_err(|e| Fail(e.to_string()))?;
            // A counter that is not there yet (a section published on the
            // next round) is waited for like a value.
            let Some(have) = lookup(&all, name)? else {
                if std::time::Instant::now() >= deadline {
                    fail!("No such counter: {}", full(name));
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let want = match value.parse::<u64>() {
                Ok(n) => n,
                Err(_) => match lookup(&all, value)? {
                    Some(n) => n,
                    None => fail!("-expect {name}: \"{value}\" is neither a number nor a counter"),
                },
            };
            let holds = match op {
                "==" => have == want,
                "!=" => have != want,
                "<" => have < want,
                ">" => have > want,
                "<=" => have <= want,
                ">=" => have >= want,
                other => fail!("-expect: unknown operator \"{other}\""),
            };
            if holds {
                log(
                    4,
                    &self.name,
                    &format!("as expected: {name} ({have}) {op} {value} ({want})"),
                );
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                fail!("Not true: {name} ({have}) {op} {value} ({want})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ends the daemon (`-wait` and the end of the test).
    pub fn end(&mut self) {
        self.cli = None;
        if let Some(child) = self.child.take() {
            log(2, &self.name, "Wait");
            let mut c = child.lock().unwrap_or_else(|p| p.into_inner());
            let _ = c.kill();
            let _ = c.wait();
            log(2, &self.name, "Stopped");
        }
    }
}
