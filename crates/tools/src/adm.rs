//! `lacquer adm`: the management client, as varnishadm. With a command
//! it sends that one command and exits 0 on success, 1 otherwise; without
//! one it reads commands from standard input until end of input or
//! `quit`. The address and secret come from `-T`/`-S`, or from the work
//! directory's `_.mgmt` file (`-n`).

use crate::help;
use lacquer_admin::{status, Client, CommandReader};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub const USAGE: &str =
    "usage: lacquer adm [-n workdir] [-T address:port] [-S secretfile] [-t timeout] [command [args...]]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    (
        "-T address:port",
        "The management address (default: the one the daemon wrote in its work directory)",
    ),
    (
        "-S secretfile",
        "The secret (default: the file the daemon names in its work directory)",
    ),
    ("-t timeout", "How long to wait for the daemon, in seconds"),
    help::HELP,
];

struct Target {
    addrs: Vec<String>,
    secret: Option<PathBuf>,
}

/// Reads `T host port` and `S path` lines from the work directory.
fn from_workdir(dir: &std::path::Path) -> Result<Target, String> {
    let path = dir.join("_.mgmt");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "Cannot read {} ({e}): is lacquer running with -n {}?",
            path.display(),
            dir.display()
        )
    })?;
    let mut target = Target {
        addrs: Vec::new(),
        secret: None,
    };
    for line in text.lines() {
        let mut parts = line.splitn(2, ' ');
        match (parts.next(), parts.next()) {
            (Some("T"), Some(rest)) => {
                if let Some((host, port)) = rest.rsplit_once(' ') {
                    let host = if host.contains(':') {
                        format!("[{host}]")
                    } else {
                        host.to_string()
                    };
                    target.addrs.push(format!("{host}:{port}"));
                }
            }
            (Some("S"), Some("none")) => {}
            (Some("S"), Some(p)) => target.secret = Some(PathBuf::from(p)),
            _ => {}
        }
    }
    if target.addrs.is_empty() {
        return Err(format!(
            "{}: the management interface is disabled (-T none)",
            path.display()
        ));
    }
    Ok(target)
}

pub fn main(args: &[String]) -> ExitCode {
    match execute(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn execute(args: &[String]) -> Result<ExitCode, String> {
    let mut addr = None;
    let mut secret = None;
    let mut workdir = None;
    let mut timeout = 5.0f64;
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') && args[i].len() == 2 {
        let flag = &args[i];
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("option {flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "-T" => addr = Some(value.clone()),
            "-S" => secret = Some(PathBuf::from(value)),
            "-n" => workdir = Some(PathBuf::from(value)),
            "-t" => {
                timeout = value
                    .parse()
                    .map_err(|_| format!("-t {value}: not a number of seconds"))?
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
        i += 2;
    }
    let command = &args[i..];
    let target = match addr {
        Some(a) => Target {
            addrs: vec![a],
            secret,
        },
        None => {
            let dir = workdir.unwrap_or_else(lacquer_core::host::tool_workdir);
            let mut t = from_workdir(&dir)?;
            if secret.is_some() {
                t.secret = secret;
            }
            t
        }
    };
    let mut client = connect(&target, Duration::from_secs_f64(timeout.max(0.001)))?;
    if command.is_empty() {
        interactive(&mut client)
    } else {
        let (code, body) = client.send_args(command).map_err(|e| e.to_string())?;
        print_body(&body);
        if code == status::OK || code == status::TRUNCATED {
            Ok(ExitCode::SUCCESS)
        } else {
            eprintln!("Command failed with error code {code}");
            Ok(ExitCode::from(1))
        }
    }
}

/// A logged-in management connection to the first address that answers.
fn connect(target: &Target, timeout: Duration) -> Result<Client, String> {
    let secret = match &target.secret {
        Some(p) => Some(
            std::fs::read(p)
                .map_err(|e| format!("Cannot read secret file {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let mut last_error = String::new();
    for a in &target.addrs {
        match Client::connect(a, secret.as_deref(), timeout) {
            Ok(c) => return Ok(c),
            Err(e) => last_error = format!("Cannot connect to {a}: {e}"),
        }
    }
    Err(last_error)
}

/// A management connection to the daemon of a work directory.
pub fn connect_workdir(dir: &std::path::Path, timeout: Duration) -> Result<Client, String> {
    connect(&from_workdir(dir)?, timeout)
}

fn print_body(body: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(body.as_bytes());
    if !body.is_empty() && !body.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Sends each command read from standard input; here documents are
/// gathered whole before they are sent.
fn interactive(client: &mut Client) -> Result<ExitCode, String> {
    let stdin = std::io::stdin();
    let prompt = stdin.is_terminal();
    if prompt {
        print_body(&client.banner);
    }
    let mut reader = CommandReader::new();
    let mut pending = String::new();
    let mut lines = stdin.lock().lines();
    loop {
        if prompt && pending.is_empty() {
            print!("lacquer> ");
            let _ = std::io::stdout().flush();
        }
        let Some(line) = lines.next() else {
            return Ok(ExitCode::SUCCESS);
        };
        let line = line.map_err(|e| e.to_string())?;
        if pending.is_empty() && line.trim().is_empty() {
            continue;
        }
        pending.push_str(&line);
        pending.push('\n');
        reader.push(line.as_bytes());
        reader.push(b"\n");
        if reader.next_input().is_none() {
            continue;
        }
        let text = std::mem::take(&mut pending);
        let (code, body) = client
            .send_line(text.trim_end_matches('\n'))
            .map_err(|e| e.to_string())?;
        print_body(&body);
        if code == status::CLOSE {
            return Ok(ExitCode::SUCCESS);
        }
        if code != status::OK && code != status::TRUNCATED {
            eprintln!("Command failed with error code {code}");
        }
    }
}
