//! `lacquer test`: runs VTC files (vtc(7)) against Lacquer, as
//! varnishtest runs them against varnishd. Each file runs in a process of
//! its own (this binary again, with `--one`), in its own process group,
//! so that a hung test and every daemon it started can be killed at the
//! timeout; this process schedules them (`-j`), prints one line per file
//! and the full trace with `-v` or when a file fails.

#![forbid(unsafe_code)]

pub mod actors;
pub mod barrier;
pub mod gzip;
pub mod h2;
pub mod http;
pub mod json;
pub mod logexpect;
pub mod macros;
pub mod net;
pub mod script;
pub mod session;
mod state;
pub mod trace;
pub mod varnish;
pub mod world;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const USAGE: &str =
    "usage: lacquer test [-j jobs] [-k] [-v] [-t timeout] [-D name=value] file.vtc ...";

/// Each option, as `--help` shows it (flag, what it does).
pub const OPTIONS: &[(&str, &str)] = &[
    ("-j jobs", "Run this many test files at once"),
    ("-k", "Go on after a failed test"),
    (
        "-v",
        "Print every test's whole trace, not only a failed one's",
    ),
    (
        "-t timeout",
        "Fail a test that runs longer than this, in seconds (default 60)",
    ),
    ("-D name=value", "Define a macro, as ${name} in the tests"),
    ("-h, --help", "Print this and exit"),
];

/// The exit status of a test skipped for a missing feature.
const SKIPPED: i32 = 77;

struct Options {
    jobs: usize,
    keep_going: bool,
    verbose: bool,
    timeout: Duration,
    defines: Vec<(String, String)>,
    files: Vec<String>,
    one: bool,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        jobs: 1,
        keep_going: false,
        verbose: false,
        timeout: Duration::from_secs(60),
        defines: Vec::new(),
        files: Vec::new(),
        one: false,
    };
    // Getopt style: "-j2" is "-j 2".
    let args: Vec<String> = args
        .iter()
        .flat_map(|a| match (a.get(..2), a.len() > 2) {
            (Some("-j" | "-t" | "-D"), true) => vec![a[..2].to_string(), a[2..].to_string()],
            _ => vec![a.clone()],
        })
        .collect();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut value = || -> Result<String, String> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        match a {
            "-j" => {
                o.jobs = value()?
                    .parse()
                    .map_err(|_| "-j needs a number".to_string())?
            }
            "-k" => o.keep_going = true,
            "-v" => o.verbose = true,
            "-q" => o.verbose = false,
            "-t" => {
                let t: f64 = value()?
                    .parse()
                    .map_err(|_| "-t needs seconds".to_string())?;
                o.timeout = Duration::from_secs_f64(t.max(0.1));
            }
            "-D" => {
                let d = value()?;
                let (n, v) = d
                    .split_once('=')
                    .ok_or_else(|| format!("-D {d}: use -D name=value"))?;
                o.defines.push((n.to_string(), v.to_string()));
            }
            "--one" => o.one = true,
            f if f.starts_with('-') => return Err(format!("unknown option \"{f}\"")),
            f => o.files.push(f.to_string()),
        }
        i += 1;
    }
    if o.files.is_empty() {
        return Err("no test files given".to_string());
    }
    o.jobs = o.jobs.max(1);
    Ok(o)
}

pub fn main(args: &[String]) -> ExitCode {
    let o = match parse_options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("lacquer test: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if o.one {
        run_one(&o);
    }
    run_all(&o)
}

/// What one test process ended with.
struct Finished {
    index: usize,
    status: Option<i32>,
    output: Vec<u8>,
    secs: f64,
}

fn run_all(o: &Options) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("lacquer test: cannot find this program: {e}");
            return ExitCode::from(2);
        }
    };
    let (tx, rx) = mpsc::channel::<Finished>();
    let mut next = 0;
    let mut running: Vec<(usize, u32, Instant)> = Vec::new();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut stop = false;
    loop {
        while !stop && running.len() < o.jobs && next < o.files.len() {
            let file = &o.files[next];
            let mut cmd = Command::new(&exe);
            cmd.arg("test")
                .arg("--one")
                .arg("-t")
                .arg(o.timeout.as_secs_f64().to_string());
            for (n, v) in &o.defines {
                cmd.arg("-D").arg(format!("{n}={v}"));
            }
            cmd.arg(file)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            match cmd.spawn() {
                Ok(mut child) => {
                    running.push((next, child.id(), Instant::now()));
                    let tx = tx.clone();
                    let index = next;
                    let started = Instant::now();
                    std::thread::spawn(move || {
                        let mut output = Vec::new();
                        let mut err = child.stderr.take();
                        let err_thread = std::thread::spawn(move || {
                            let mut e = Vec::new();
                            if let Some(s) = err.as_mut() {
                                let _ = s.read_to_end(&mut e);
                            }
                            e
                        });
                        if let Some(mut out) = child.stdout.take() {
                            let _ = out.read_to_end(&mut output);
                        }
                        output.extend(err_thread.join().unwrap_or_default());
                        let status = child.wait().ok().and_then(|s| s.code());
                        let _ = tx.send(Finished {
                            index,
                            status,
                            output,
                            secs: started.elapsed().as_secs_f64(),
                        });
                    });
                }
                Err(e) => {
                    println!("#    top  TEST {file} FAILED (0.000) cannot start: {e}");
                    failed += 1;
                }
            }
            next += 1;
        }
        if running.is_empty() {
            break;
        }
        let deadline = running
            .iter()
            .map(|(_, _, t)| *t + o.timeout)
            .min()
            .expect("not empty");
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(f) => {
                running.retain(|(i, _, _)| *i != f.index);
                let file = &o.files[f.index];
                let text = String::from_utf8_lossy(&f.output);
                match f.status {
                    Some(0) => {
                        if o.verbose {
                            print!("{text}");
                        }
                        println!("#    top  TEST {file} passed ({:.3})", f.secs);
                        passed += 1;
                    }
                    Some(SKIPPED) => {
                        if o.verbose {
                            print!("{text}");
                        }
                        println!("#    top  TEST {file} skipped");
                        skipped += 1;
                    }
                    status => {
                        print!("{text}");
                        let why = match status {
                            Some(c) => format!("exit={c}"),
                            None => "killed".to_string(),
                        };
                        println!("#    top  TEST {file} FAILED ({:.3}) {why}", f.secs);
                        failed += 1;
                        stop |= !o.keep_going;
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                for (i, pid, started) in &running {
                    if now >= *started + o.timeout {
                        println!(
                            "#    top  TEST {} timed out after {:.0} s: killing it",
                            o.files[*i],
                            o.timeout.as_secs_f64()
                        );
                        // The whole process group this runner created
                        // for the test, its daemons included.
                        kill_group(*pid);
                    }
                }
                // Killed tests report through the channel; do not kill twice.
                for r in running.iter_mut() {
                    if now >= r.2 + o.timeout {
                        r.2 = now + Duration::from_secs(3600);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if skipped > 0 {
        println!("{passed} passed, {failed} failed, {skipped} skipped");
    } else {
        println!("{passed} passed, {failed} failed");
    }
    if failed > 0 || next < o.files.len() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A fresh temporary directory for one test.
fn make_tmpdir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = base.join(format!("vtc.{}.{nanos:08x}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Runs the one test file of `--one` in this process, then exits: 0
/// passed, 77 skipped, 2 failed.
fn run_one(o: &Options) -> ! {
    let file = &o.files[0];
    trace::log(1, "top", &format!("TEST {file} starting"));
    let script = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => trace::fatal("top", &format!("Cannot read {file}: {e}")),
    };
    let tmpdir = make_tmpdir().unwrap_or_else(|e| {
        trace::fatal("top", &format!("Cannot make a temporary directory: {e}"))
    });
    let exe = std::env::current_exe().unwrap_or_else(|e| trace::fatal("top", &e.to_string()));
    let w = world::World::new(tmpdir.clone(), exe, o.timeout);
    define_builtin_macros(&w, Path::new(file), &tmpdir);
    for (n, v) in &o.defines {
        w.macros.define(n, v);
    }
    let mut top = world::Top::new(w);
    match top.run_script(&script) {
        Ok(outcome) => {
            top.reset();
            let _ = std::fs::remove_dir_all(&tmpdir);
            match outcome {
                world::Outcome::Passed => {
                    trace::log(1, "top", &format!("TEST {file} completed"));
                    std::process::exit(0)
                }
                world::Outcome::Skipped(what) => {
                    trace::log(1, "top", &format!("SKIPPING test, lacking: {what}"));
                    std::process::exit(SKIPPED)
                }
            }
        }
        Err(trace::Fail(m)) => trace::fatal("top", &m),
    }
}

fn define_builtin_macros(w: &world::World, file: &Path, tmpdir: &Path) {
    let m = &w.macros;
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let testdir = file.parent().map_or_else(
        || PathBuf::from("."),
        |p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_path_buf()
            }
        },
    );
    m.define("testdir", &abs(&testdir).display().to_string());
    m.define("tmpdir", &tmpdir.display().to_string());
    if let Ok(pwd) = std::env::current_dir() {
        m.define("pwd", &pwd.display().to_string());
    }
    m.define("localhost", "127.0.0.1");
    m.define("bad_ip", "192.0.2.255");
    m.define("listen_addr", "127.0.0.1:0");
    // A port nothing listens on: bound, then released.
    let bad = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or_else(|_| "127.0.0.1:1".to_string(), |a| a.to_string());
    m.define("bad_backend", &bad);
}

/// Sends SIGKILL to a process group, through the shell's kill.
fn kill_group(pgid: u32) {
    let _ = std::process::Command::new("sh")
        .args(["-c", &format!("kill -s KILL -- -{pgid}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}
