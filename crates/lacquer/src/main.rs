//! `lacquer`: the one binary. `lacquer serve …` runs the accelerator with
//! varnishd's flags; `lacquer adm …` manages it as varnishadm does;
//! `lacquer test …` runs VTC files as varnishtest does; `log`, `ncsa`,
//! `top`, `hist` and `stat` read a daemon's shared memory as varnishlog,
//! varnishncsa, varnishtop, varnishhist and varnishstat do; `lacquer
//! demo` runs a small site with Lacquer in front of it.

#![forbid(unsafe_code)]

mod demo;

use lacquer_tools::{adm, help, hist, log, ncsa, reload, stat, top};

use lacquer_server::config::{parse_args, ServeAction};
use std::process::ExitCode;

/// The commands other than `serve`, each with its usage text (kept beside
/// the command's own option parsing, so that what is printed here is what
/// the command takes).
const COMMANDS: [(&str, &str, &[help::OptionLine]); 10] = [
    ("adm", adm::USAGE, adm::OPTIONS),
    ("stat", stat::USAGE, stat::OPTIONS),
    ("log", log::USAGE, log::OPTIONS),
    ("ncsa", ncsa::USAGE, ncsa::OPTIONS),
    ("top", top::USAGE, top::OPTIONS),
    ("hist", hist::USAGE, hist::OPTIONS),
    ("test", lacquer_vtc::USAGE, lacquer_vtc::OPTIONS),
    ("reload", reload::USAGE, reload::OPTIONS),
    ("demo", demo::USAGE, demo::OPTIONS),
    (
        "upgrade-vcl",
        UPGRADE_USAGE,
        &[("-h, --help", "Print this and exit")],
    ),
];

const UPGRADE_USAGE: &str = "usage: lacquer upgrade-vcl old.vcl > new.vcl";

/// `serve`'s other forms, under its option table's usage.
const SERVE_FORMS: &str = "       lacquer serve -C -f file.vcl
       lacquer serve -x parameter|vsl|cli|builtin|optstring|counters|vcl
       lacquer serve -V";

/// `serve`'s usage: its options, then its other forms.
fn serve_help() -> String {
    format!("{}\n{SERVE_FORMS}", lacquer_server::config::serve_usage())
}

/// Every command's usage, as `lacquer --help` prints it.
fn usage_text() -> String {
    let mut out = serve_help();
    for (_, usage, _) in COMMANDS {
        out.push('\n');
        out.push_str(&usage.replacen("usage: ", "       ", 1));
    }
    out
}

/// One command's usage, when its first argument asks for it: `--help`
/// for every command, and the flag the Varnish tool it stands for
/// answers (varnishd's `-?`, `-h` for the others; `serve`'s `-h` is
/// varnishd's hash option).
fn help_for(command: &str, first: Option<&str>) -> Option<String> {
    let asked = match (command, first?) {
        (_, "--help") => true,
        ("serve", "-?") => true,
        ("serve", _) => false,
        (_, "-h") => true,
        _ => false,
    };
    if !asked {
        return None;
    }
    match command {
        "serve" => Some(serve_help()),
        _ => COMMANDS
            .iter()
            .find(|(name, _, _)| *name == command)
            .map(|(_, usage, options)| help::render(usage, options)),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(command) = args.first() {
        if let Some(usage) = help_for(command, args.get(1).map(String::as_str)) {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
    }
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
        eprintln!("{UPGRADE_USAGE}");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag a command's usage names has its line under it.
    #[test]
    fn every_option_in_a_usage_is_described() {
        for (name, usage, options) in COMMANDS {
            for flag in help::flags_in(usage) {
                let described = options
                    .iter()
                    .any(|(f, _)| f.split([' ', ',']).any(|word| word == format!("-{flag}")));
                assert!(described, "lacquer {name}: -{flag} is not described");
            }
            let text = help_for(name, Some("--help")).unwrap();
            assert!(text.starts_with(usage) && text.contains("--help"), "{text}");
        }
    }
}
