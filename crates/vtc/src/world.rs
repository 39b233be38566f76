//! The top level of one test: runs the test file's commands in order
//! (`varnishtest`, `server`, `client`, `varnish`, `barrier`, `delay`,
//! `shell`, `feature`, …) over the [`World`] its actors share.

use crate::actors::{Client, Server};
use crate::barrier::{self, Barrier};
use crate::fail;
use crate::script::{self, Command};
pub use crate::state::World;
use crate::trace::{log, Fail, Step};
use crate::varnish::Varnish;
use std::collections::HashMap;
use std::sync::Arc;

/// How a test ended, when it did not fail.
pub enum Outcome {
    Passed,
    /// A `feature` the machine lacks: the reason.
    Skipped(String),
}

/// The top level of a test.
pub struct Top {
    pub world: Arc<World>,
    /// In definition order, for `-vcl+backend`.
    servers: Vec<Server>,
    clients: HashMap<String, Client>,
    varnishes: HashMap<String, Varnish>,
    logexpects: HashMap<String, crate::logexpect::LogExpect>,
}

impl Top {
    pub fn new(world: World) -> Top {
        Top {
            world: Arc::new(world),
            servers: Vec::new(),
            clients: HashMap::new(),
            varnishes: HashMap::new(),
            logexpects: HashMap::new(),
        }
    }

    /// Runs the test's script.
    pub fn run_script(&mut self, script: &str) -> Step<Outcome> {
        let cmds = script::parse(script)?;
        for cmd in &cmds {
            let cmd = &cmd
                .expand(&self.world.macros)
                .map_err(|Fail(m)| Fail(format!("{m} (line {})", cmd.line)))?;
            let shown: Vec<&str> = cmd
                .words
                .iter()
                .map(|w| if w.block { "{" } else { w.text.as_str() })
                .collect();
            log(2, "top", &format!("=== {}", shown.join(" ")));
            if let Some(reason) = self
                .command(cmd)
                .map_err(|Fail(m)| Fail(format!("{m} (line {})", cmd.line)))?
            {
                return Ok(Outcome::Skipped(reason));
            }
        }
        Ok(Outcome::Passed)
    }

    /// Stops every actor at the end of the test.
    pub fn reset(&mut self) {
        log(1, "top", "RESETTING after the test");
        for c in self.clients.values_mut() {
            c.wait();
        }
        for l in self.logexpects.values_mut() {
            l.wait();
        }
        for s in &mut self.servers {
            s.stop();
        }
        for v in self.varnishes.values_mut() {
            v.end();
        }
    }

    /// Runs one top-level command; `Some(reason)` skips the test.
    fn command(&mut self, cmd: &Command) -> Step<Option<String>> {
        let w: Vec<&str> = cmd.words.iter().map(|w| w.text.as_str()).collect();
        match w[0] {
            "varnishtest" | "vtest" => {
                log(1, "top", &format!("VTEST {}", w.get(1).unwrap_or(&"")));
            }
            "server" => self.server(cmd)?,
            "client" => self.client(cmd)?,
            "varnish" => self.varnish(cmd)?,
            "barrier" => self.barrier(&w)?,
            "delay" => crate::session::delay("top", w.get(1).copied().unwrap_or("0"))?,
            "shell" => self.shell(cmd)?,
            "feature" => return self.feature(&w[1..]),
            "setenv" => {
                let (Some(name), Some(value)) = (w.get(1), w.get(2)) else {
                    fail!("setenv: needs a name and a value");
                };
                std::env::set_var(name, value);
            }
            "filewrite" => {
                let append = w.get(1) == Some(&"-a");
                let rest = &w[1 + usize::from(append)..];
                let Some((path, texts)) = rest.split_first() else {
                    fail!("filewrite: needs a file name");
                };
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .write(true)
                    .append(append)
                    .truncate(!append)
                    .open(path)
                    .map_err(|e| Fail(format!("filewrite {path}: {e}")))?;
                use std::io::Write;
                for t in texts {
                    f.write_all(t.as_bytes()).map_err(|e| Fail(e.to_string()))?;
                }
            }
            "logexpect" => {
                let name = w.get(1).copied().unwrap_or_default().to_string();
                if !name.starts_with('l') {
                    fail!("logexpect name must start with 'l' (is: {name})");
                }
                let world = self.world.clone();
                self.logexpects
                    .entry(name.clone())
                    .or_insert_with(|| crate::logexpect::LogExpect::new(&name))
                    .command(&world, cmd)?;
            }
            other => fail!("Unknown command: \"{other}\""),
        }
        Ok(None)
    }

    fn server(&mut self, cmd: &Command) -> Step {
        let name = cmd.words.get(1).map(|w| w.text.clone()).unwrap_or_default();
        if !name.starts_with('s') {
            fail!("Server name must start with 's' (is: {name})");
        }
        let idx = match self.servers.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                self.servers.push(Server::new(&name));
                self.servers.len() - 1
            }
        };
        let world = self.world.clone();
        let s = &mut self.servers[idx];
        let words = &cmd.words[2..];
        let mut i = 0;
        let mut bind_at_end = true;
        while i < words.len() {
            let w = &words[i];
            let next = |i: &mut usize| option_value("server", words, i);
            // As in varnishtest: changing or starting a server that is
            // still running waits for it first.
            if w.block || !matches!(w.text.as_str(), "-wait" | "-break") {
                s.wait();
            }
            match w.text.as_str() {
                _ if w.block => s.spec = w.text.clone(),
                "-listen" => s.listen = next(&mut i)?,
                "-repeat" => s.repeat = parse_count(&next(&mut i)?)?,
                "-keepalive" => s.keepalive = true,
                "-rcvbuf" => s.rcvbuf = Some(parse_count(&next(&mut i)?)? as usize),
                "-dispatch" => {
                    if name != "s0" {
                        fail!("server: -dispatch only works on s0");
                    }
                    // As in varnishtest, it starts the server too.
                    s.dispatch = true;
                    s.start(&world)?;
                }
                "-start" => s.start(&world)?,
                "-wait" => {
                    s.wait();
                    bind_at_end = false;
                }
                "-break" => {
                    s.stop();
                    bind_at_end = false;
                }
                other => fail!("server: unknown option \"{other}\""),
            }
            i += 1;
        }
        if bind_at_end {
            s.bind(&world)?;
        }
        Ok(())
    }

    fn client(&mut self, cmd: &Command) -> Step {
        let name = cmd.words.get(1).map(|w| w.text.clone()).unwrap_or_default();
        if !name.starts_with('c') {
            fail!("Client name must start with 'c' (is: {name})");
        }
        let world = self.world.clone();
        let c = self
            .clients
            .entry(name.clone())
            .or_insert_with(|| Client::new(&name));
        let words = &cmd.words[2..];
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            let next = |i: &mut usize| option_value("client", words, i);
            match w.text.as_str() {
                _ if w.block => {
                    c.wait();
                    c.spec = w.text.clone();
                }
                "-connect" => c.connect = next(&mut i)?,
                "-proxy1" => c.proxy = Some((1, next(&mut i)?)),
                "-proxy2" => c.proxy = Some((2, next(&mut i)?)),
                "-repeat" => c.repeat = parse_count(&next(&mut i)?)?,
                "-keepalive" => c.keepalive = true,
                "-rcvbuf" => c.rcvbuf = Some(parse_count(&next(&mut i)?)? as usize),
                "-start" => c.start(&world)?,
                "-wait" => c.wait(),
                "-run" => {
                    c.start(&world)?;
                    c.wait();
                }
                other => fail!("client: unknown option \"{other}\""),
            }
            i += 1;
        }
        Ok(())
    }

    fn varnish(&mut self, cmd: &Command) -> Step {
        let name = cmd.words.get(1).map(|w| w.text.clone()).unwrap_or_default();
        if !name.starts_with('v') {
            fail!("Varnish name must start with 'v' (is: {name})");
        }
        let world = self.world.clone();
        let backends: Vec<(String, (String, String))> = self
            .servers
            .iter()
            .filter_map(|s| s.endpoint().map(|a| (s.name.clone(), a)))
            .collect();
        let v = self
            .varnishes
            .entry(name.clone())
            .or_insert_with(|| Varnish::new(&name, &world));
        let words = &cmd.words[2..];
        let mut i = 0;
        while i < words.len() {
            let opt = words[i].text.as_str();
            let mut next = || option_value("varnish", words, &mut i);
            match opt {
                "-arg" => v.arg(&next()?)?,
                "-syntax" => v.syntax(&next()?),
                "-jail" => v.jail(&next()?)?,
                "-vcl" => {
                    let text = v.vcl_text(&world, &next()?, &[])?;
                    v.load_vcl(&world, &text)?;
                }
                "-vcl+backend" => {
                    let text = v.vcl_text(&world, &next()?, &backends)?;
                    v.load_vcl(&world, &text)?;
                }
                "-errvcl" => {
                    let expected = next()?;
                    let text = v.vcl_text(&world, &next()?, &[])?;
                    v.err_vcl(&world, &expected, &text)?;
                }
                "-start" => v.start(&world)?,
                "-stop" => v.stop(&world)?,
                "-wait" => v.end(),
                "-cli" => {
                    v.cli(&world, &next()?)?;
                }
                "-cliok" => {
                    let c = next()?;
                    let (status, _) = v.cli(&world, &c)?;
                    if status != 200 {
                        fail!("FAIL CLI response {status} expected 200");
                    }
                }
                "-clierr" => {
                    let want = next()?;
                    let c = next()?;
                    let (status, _) = v.cli(&world, &c)?;
                    if status.to_string() != want {
                        fail!("FAIL CLI response {status} expected {want}");
                    }
                }
                "-clijson" => {
                    let c = next()?;
                    let (status, body) = v.cli(&world, &c)?;
                    if status != 200 {
                        fail!("FAIL CLI response {status} expected 200");
                    }
                    if !crate::json::is_json(&body) {
                        fail!("FAIL CLI response is not JSON: {body}");
                    }
                }
                "-cliexpect" => {
                    let pattern = next()?;
                    let c = next()?;
                    let re = regex::Regex::new(&pattern)
                        .map_err(|e| Fail(format!("-cliexpect: bad regex: {e}")))?;
                    let (status, body) = v.cli(&world, &c)?;
                    if status != 200 {
                        fail!("FAIL CLI response {status} expected 200");
                    }
                    if !crate::session::matches(&re, &body) {
                        fail!("Expect mismatch: \"{pattern}\" does not match the response");
                    }
                    log(3, &name, &format!("Expect match: \"{pattern}\""));
                }
                "-expect" => {
                    let counter = next()?;
                    let op = next()?;
                    let value = next()?;
                    v.expect_counter(&world, &counter, &op, &value)?;
                }
                "-vsc" => v.dump_counters(&world, &next()?)?,
                "-vsl_catchup" | "-cleanup" => {}
                other => fail!("varnish: unknown option \"{other}\""),
            }
            i += 1;
        }
        Ok(())
    }

    fn barrier(&mut self, w: &[&str]) -> Step {
        let name = w.get(1).copied().unwrap_or("");
        if !name.starts_with('b') {
            fail!("Barrier name must start with 'b' (is: {name})");
        }
        match w.get(2).copied() {
            Some(kind @ ("cond" | "sock")) => {
                let n = parse_count(w.get(3).copied().unwrap_or(""))? as usize;
                let cyclic = w[4..].contains(&"-cyclic");
                let b = Arc::new(Barrier::new(name, n, cyclic, self.world.http_timeout));
                if kind == "sock" {
                    let l = std::net::TcpListener::bind("127.0.0.1:0")
                        .map_err(|e| Fail(format!("Barrier {name}: {e}")))?;
                    let a = l.local_addr().map_err(|e| Fail(e.to_string()))?;
                    self.world.macros.define_endpoint(
                        name,
                        &a.ip().to_string(),
                        &a.port().to_string(),
                    );
                    barrier::serve_socket(b.clone(), l);
                }
                self.world.define_barrier(name, b);
                Ok(())
            }
            Some("sync") => self.world.barrier(name)?.sync("top"),
            _ => fail!("barrier: use \"barrier {name} cond|sock N\" or \"barrier {name} sync\""),
        }
    }

    fn shell(&mut self, cmd: &Command) -> Step {
        let words = &cmd.words[1..];
        let (mut exit, mut expect, mut matches): (Option<i32>, Option<String>, Option<String>) =
            (None, None, None);
        let mut i = 0;
        let mut script = None;
        while i < words.len() {
            let value = words.get(i + 1).map(|w| w.text.clone());
            match words[i].text.as_str() {
                "-exit" if !words[i].block => {
                    exit = value.and_then(|v| v.parse().ok());
                    i += 1;
                }
                "-expect" if !words[i].block => {
                    expect = value;
                    i += 1;
                }
                "-match" if !words[i].block => {
                    matches = value;
                    i += 1;
                }
                _ => script = Some(words[i].text.clone()),
            }
            i += 1;
        }
        let Some(script) = script else {
            fail!("shell: no command given");
        };
        let script = self.world.macros.expand(&script)?;
        log(3, "top", &format!("shell_cmd|{}", script.trim()));
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .current_dir(&self.world.tmpdir)
            .output()
            .map_err(|e| Fail(format!("shell: {e}")))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        for l in stdout.lines() {
            log(4, "top", &format!("shell_out|{l}"));
        }
        for l in String::from_utf8_lossy(&out.stderr).lines() {
            log(4, "top", &format!("shell_err|{l}"));
        }
        let status = out.status.code().unwrap_or(-1);
        log(3, "top", &format!("shell_status = 0x{status:04x}"));
        let want = exit.unwrap_or(0);
        if status != want {
            fail!("shell_exit not as expected: got 0x{status:04x} wanted 0x{want:04x}");
        }
        if let Some(e) = expect {
            if !stdout.contains(&e) {
                fail!("shell_expect not found: (\"{e}\")");
            }
        }
        if let Some(m) = matches {
            let re = regex::Regex::new(&m).map_err(|e| Fail(format!("shell -match: {e}")))?;
            if !crate::session::matches(&re, &stdout) {
                fail!("shell_match failed: (\"{m}\")");
            }
        }
        Ok(())
    }

    /// `feature`: what this machine and Lacquer can honestly answer.
    fn feature(&mut self, names: &[&str]) -> Step<Option<String>> {
        let mut i = 0;
        while i < names.len() {
            let f = names[i];
            // `!name` holds when `name` does not.
            let (negated, name) = match f.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, f),
            };
            let ok = match name {
                // How this build was made: none of these apply.
                "workspace_emulator" | "sanitizer" | "asan" | "msan" | "tsan" | "ubsan"
                | "coverage" | "persistent_storage" => false,
                "user_varnish" | "user_vcache" | "group_varnish" => {
                    std::process::Command::new("getent")
                        .arg(if name.starts_with("group") {
                            "group"
                        } else {
                            "passwd"
                        })
                        .arg(name.split_once('_').map_or("", |(_, n)| n))
                        .stdout(std::process::Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                }
                "64bit" => cfg!(target_pointer_width = "64"),
                "ipv4" => std::net::TcpListener::bind("127.0.0.1:0").is_ok(),
                "ipv6" => std::net::TcpListener::bind("[::1]:0").is_ok(),
                "SO_RCVTIMEO_WORKS" => true,
                "root" => effective_uid() == Some(0),
                "ignore_unknown_macro" => {
                    self.world.macros.ignore_unknown();
                    true
                }
                "cmd" => {
                    i += 1;
                    let c = names.get(i).copied().unwrap_or("false");
                    std::process::Command::new("/bin/sh")
                        .arg("-c")
                        .arg(c)
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                }
                _ => false,
            };
            if ok == negated {
                return Ok(Some(f.to_string()));
            }
            i += 1;
        }
        Ok(None)
    }
}

/// The word after the option at `*i` (which moves to it).
fn option_value(command: &str, words: &[crate::script::Word], i: &mut usize) -> Step<String> {
    *i += 1;
    words
        .get(*i)
        .map(|w| w.text.clone())
        .ok_or_else(|| Fail(format!("{command}: {} needs a value", words[*i - 1].text)))
}

fn parse_count(s: &str) -> Step<u64> {
    s.parse().map_err(|_| Fail(format!("not a count: \"{s}\"")))
}

/// The process's effective user id, from `/proc/self/status`.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}
