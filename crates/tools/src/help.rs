//! What each command's `--help` (and `-h`) prints under its usage: one
//! line an option, as varnishlog's `-h` does. The options the log readers
//! share are described once here; each command lists its own beside its
//! usage.

/// One option: the flag with its argument, and what it does.
pub type OptionLine = (&'static str, &'static str);

pub const WORKDIR: OptionLine = (
    "-n workdir",
    "The daemon's work directory (default: LACQUER_DEFAULT_N, else VARNISH_DEFAULT_N, else /var/lib/lacquer while a daemon holds it, else lacquer serve's default)",
);
pub const HEAD: OptionLine = (
    "-d",
    "Start with what the log holds now, oldest first, then go on",
);
pub const READ_FILE: OptionLine = (
    "-r file",
    "Read a file `lacquer log -w` wrote, not the daemon's log",
);
pub const GROUPING: OptionLine = (
    "-g raw|vxid|request|session",
    "Group the records: one by one, by transaction, a client request with its fetches and includes, or a whole session",
);
pub const QUERY: OptionLine = (
    "-q query",
    "Only the transactions the query matches (varnishlog's query language)",
);
pub const CLIENT: OptionLine = ("-c", "Only client transactions");
pub const BACKEND: OptionLine = ("-b", "Only backend transactions");
pub const INCLUDE_TAGS: OptionLine = (
    "-i taglist",
    "Only records of these tags (comma-separated, globs allowed)",
);
pub const EXCLUDE_TAGS: OptionLine = ("-x taglist", "Leave out records of these tags");
pub const INCLUDE_REGEX: OptionLine = (
    "-I [taglist:]regex",
    "Only records (of these tags) whose payload matches",
);
pub const EXCLUDE_REGEX: OptionLine = (
    "-X [taglist:]regex",
    "Leave out records (of these tags) whose payload matches",
);
pub const COUNT: OptionLine = ("-k count", "Stop after this many transactions");
pub const TIMEOUT: OptionLine = (
    "-T seconds",
    "Give up waiting for a transaction's end after this long (default 120)",
);
pub const LIMIT: OptionLine = (
    "-L limit",
    "Hold at most this many incomplete transactions (default 1000)",
);
pub const RATE: OptionLine = (
    "-R limit[/duration]",
    "Write at most this many transactions per second, or per duration (s, m, h, d)",
);
pub const DAEMON: OptionLine = ("-D", "Run in the background");
pub const PID_FILE: OptionLine = ("-P pidfile", "Write the process id to this file");
pub const OPEN_TIMEOUT: OptionLine = (
    "-t seconds|off",
    "How long to wait for the daemon's log to appear (default 5; off: for ever)",
);
pub const ONCE: OptionLine = ("-1", "Print once and exit");
pub const HELP: OptionLine = ("-h, --help", "Print this and exit");

/// The usage, then each option on a line of its own.
pub fn render(usage: &str, options: &[OptionLine]) -> String {
    let mut out = String::from(usage);
    if options.is_empty() {
        return out;
    }
    let width = options
        .iter()
        .map(|(flag, _)| flag.len())
        .max()
        .unwrap_or(0);
    out.push_str("\n\n");
    for (flag, what) in options {
        out.push_str(&format!("    {flag:<width$}  {what}\n"));
    }
    out.pop();
    out
}

/// The flags a usage text names (each `-x` after a space or `[`).
pub fn flags_in(usage: &str) -> Vec<char> {
    let bytes = usage.as_bytes();
    let mut flags = Vec::new();
    for i in 1..bytes.len().saturating_sub(1) {
        let before = bytes[i - 1];
        let flag = bytes[i + 1] as char;
        if bytes[i] == b'-'
            && (before == b'[' || before == b' ')
            && (flag.is_ascii_alphanumeric())
            && bytes.get(i + 2).is_none_or(|b| !b.is_ascii_alphanumeric())
            && !flags.contains(&flag)
        {
            flags.push(flag);
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_lined_up_under_the_usage() {
        let text = render(
            "usage: x [-a] [-b value]",
            &[("-a", "A."), ("-b value", "B.")],
        );
        assert_eq!(
            text,
            "usage: x [-a] [-b value]\n\n    -a        A.\n    -b value  B."
        );
        assert_eq!(
            flags_in("usage: lacquer stat [-n workdir] [-1 | -j] [-f [^]glob]..."),
            ['n', '1', 'j', 'f']
        );
    }
}
