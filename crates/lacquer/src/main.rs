//! `lacquer`: the one binary. `lacquer serve …` runs the accelerator with
//! varnishd's flags; `lacquer adm …` manages it as varnishadm does;
//! `lacquer test …` runs VTC files as varnishtest does; `log`, `ncsa`,
//! `top`, `hist` and `stat` read a daemon's shared memory as varnishlog,
//! varnishncsa, varnishtop, varnishhist and varnishstat do; `lacquer
//! demo` runs a small site with Lacquer in front of it.

#![forbid(unsafe_code)]

mod demo;

use lacquer_tools::{adm, hist, log, ncsa, reload, stat, top};

use lacquer_server::config::{parse_args, ServeAction};
use std::process::ExitCode;

/// The other commands' usage lines (`serve`'s come from its option
/// table).
const OTHER_USAGE: &str = "       lacquer serve -C -f file.vcl
       lacquer serve -x parameter
       lacquer serve -V
       lacquer adm [-n workdir] [-T address:port] [-S secretfile] [command [args...]]
       lacquer stat [-n workdir] [-1 | -j | -l] [-f [^]glob]...
       lacquer ncsa [-n workdir] [-d] [-b | -c] [-F format] [-q query]
       lacquer top [-n workdir] [-1] [-f] [-p period] [-i tags] [-q query]
       lacquer hist [-n workdir] [-1] [-P profile] [-q query]
       lacquer log [-n workdir] [-d] [-g raw|vxid|request|session] [-q query] [-i tags] ...
       lacquer test [-j jobs] [-k] [-v] [-t timeout] [-D name=value] file.vtc ...
       lacquer upgrade-vcl old.vcl > new.vcl
       lacquer demo [-a address:port] [-n workdir]
       lacquer reload [-n workdir] [-m keep] [file.vcl]";

fn usage_text() -> String {
    format!("{}\n{OTHER_USAGE}", lacquer_server::config::serve_usage())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("demo") => demo::main(&args[1..]),
        Some("adm") => adm::main(&args[1..]),
        Some("reload") => reload::main(&args[1..]),
        Some("log") => log::main(&args[1..]),
        Some("stat") => stat::main(&args[1..]),
        Some("ncsa") => ncsa::main(&args[1..]),
        Some("top") => top::main(&args[1..]),
        Some("hist") => hist::main(&args[1..]),
        Some("test") => lacquer_vtc::main(&args[1..]),
        Some("upgrade-vcl") => upgrade_vcl(&args[1..]),
        Some("-V") | Some("--version") => {
            println!("lacquer {}", lacquer_core::VERSION);
            ExitCode::SUCCESS
        }
        Some("-h") | Some("--help") | Some("help") => {
            println!("{}", usage_text());
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("lacquer: unknown command \"{other}\"\n{}", usage_text());
            ExitCode::from(2)
        }
        None => {
            eprintln!("{}", usage_text());
            ExitCode::from(2)
        }
    }
}

/// `lacquer upgrade-vcl OLD.vcl`: the VCL 4.1 form of a Varnish 3
/// program, on standard output.
fn upgrade_vcl(args: &[String]) -> ExitCode {
    let [path] = args else {
        eprintln!("usage: lacquer upgrade-vcl old.vcl > new.vcl");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("lacquer upgrade-vcl: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    if !lacquer_vcl::upgrade::is_vcl3(&text) {
        eprintln!("lacquer upgrade-vcl: {path} does not read as VCL 3.0; nothing to do");
        return ExitCode::from(1);
    }
    match lacquer_vcl::upgrade::upgrade(&text) {
        Ok(new) => {
            print!("{new}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lacquer upgrade-vcl: {path}: {e}");
            ExitCode::from(2)
        }
    }
}

fn serve(args: &[String]) -> ExitCode {
    match parse_args(args) {
        Ok(ServeAction::Version) => {
            println!(
                "lacquer {} ({})",
                lacquer_core::VERSION,
                lacquer_core::product_token()
            );
            ExitCode::SUCCESS
        }
        Ok(ServeAction::Describe(what)) => {
            print!("{}", lacquer_server::describe(what));
            ExitCode::SUCCESS
        }
        Ok(ServeAction::Compile(cfg)) => {
            match cfg.vcl.as_ref().expect("-C needs -b or -f").compile(
                &cfg.params,
                cfg.store_names(),
                Vec::new(),
            ) {
                Ok(program) => {
                    for w in &program.warnings {
                        eprintln!("Warning: {w}");
                    }
                    println!("VCL compiled.");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Ok(ServeAction::Run(cfg)) => match lacquer_server::serve(*cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::from(2)
        }
    }
}
