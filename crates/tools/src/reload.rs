//! `lacquer reload`: what varnishreload does. Loads a VCL file under a new
//! name (`reload_<time>`), switches to it, and discards the programs
//! earlier reloads left that nothing uses any more, keeping the newest
//! `-m` of them. Without a file it reloads the file the active program
//! was loaded from, as varnishreload does. A program that does not compile
//! changes nothing: the running one stays, and the command fails with the
//! compiler's message.

use crate::help;
use lacquer_admin::{status, Client};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const USAGE: &str = "usage: lacquer reload [-n workdir] [-m keep] [file.vcl]";

/// Each option, as `--help` shows it.
pub const OPTIONS: &[help::OptionLine] = &[
    help::WORKDIR,
    (
        "-m keep",
        "Keep this many programs earlier reloads left unused (default 0)",
    ),
    (
        "file.vcl",
        "The program to load (default: the file the active program came from)",
    ),
    help::HELP,
];

pub fn main(args: &[String]) -> ExitCode {
    match execute(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lacquer reload: {e}");
            ExitCode::from(1)
        }
    }
}

fn execute(args: &[String]) -> Result<(), String> {
    let mut workdir = None;
    let mut keep = 0usize;
    let mut file = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-n" | "-m" => {
                let v = args.get(i + 1).ok_or(USAGE)?;
                match args[i].as_str() {
                    "-n" => workdir = Some(PathBuf::from(v)),
                    _ => keep = v.parse().map_err(|_| format!("-m {v}: not a count"))?,
                }
                i += 2;
            }
            f if !f.starts_with('-') && file.is_none() => {
                file = Some(f.to_string());
                i += 1;
            }
            _ => return Err(USAGE.to_string()),
        }
    }
    let dir = workdir.unwrap_or_else(lacquer_core::host::tool_workdir);
    let mut cli = crate::adm::connect_workdir(&dir, Duration::from_secs(30))?;
    let file = match file {
        Some(file) => file,
        None => active_file(&mut cli)?,
    };
    let path = std::fs::canonicalize(&file).map_err(|e| format!("{file}: {e}"))?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    let name = format!("reload_{}_{:09}", stamp.as_secs(), stamp.subsec_nanos());
    let path = path.display().to_string();
    run(&mut cli, &["vcl.load", &name, &path])?;
    run(&mut cli, &["vcl.use", &name])?;
    println!("VCL '{name}' compiled and now active");
    // Earlier reloads nothing uses: oldest first, the newest `keep` kept.
    let list = run(&mut cli, &["vcl.list"])?;
    let mut old: Vec<&str> = list
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let name = *cols.get(4)?;
            let unused = cols[0] == "available" && cols.len() == 5;
            (unused && name.starts_with("reload_")).then_some(name)
        })
        .collect();
    old.sort_unstable();
    let discard = old.len().saturating_sub(keep);
    for name in &old[..discard] {
        run(&mut cli, &["vcl.discard", name])?;
        println!("VCL '{name}' discarded");
    }
    Ok(())
}

/// The file the active program was loaded from: `vcl.show -v` names
/// each source file of a program, the main one first.
fn active_file(cli: &mut Client) -> Result<String, String> {
    let list = run(cli, &["vcl.list"])?;
    let active = list
        .lines()
        .find(|l| l.starts_with("active"))
        .and_then(|l| l.split_whitespace().nth(4))
        .ok_or("no program is active: name the file to load")?
        .to_string();
    let shown = run(cli, &["vcl.show", "-v", &active])?;
    main_source(&shown)
        .filter(|f| f.starts_with('/'))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("the active program ({active}) was not loaded from a file: name one")
        })
}

/// The main source file's name in a `vcl.show -v` answer: its first
/// `// VCL.SHOW 0 <size> <name>` line.
fn main_source(shown: &str) -> Option<&str> {
    let rest = shown.lines().next()?.strip_prefix("// VCL.SHOW 0 ")?;
    let (_, name) = rest.split_once(' ')?;
    Some(name)
}

/// One command that must succeed; its answer.
fn run(cli: &mut Client, args: &[&str]) -> Result<String, String> {
    let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (code, body) = cli.send_args(&owned).map_err(|e| e.to_string())?;
    if code != status::OK {
        return Err(format!("{}: {body}", args.join(" ")));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_source_is_the_first_shown() {
        let shown =
            "// VCL.SHOW 0 42 /etc/lacquer/default.vcl\nvcl 4.1;\n\n// VCL.SHOW 1 9 Builtin\n";
        assert_eq!(main_source(shown), Some("/etc/lacquer/default.vcl"));
        assert_eq!(main_source("vcl 4.1;\n"), None);
    }
}
