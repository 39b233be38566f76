//! The command table: every management command once, with how it is
//! written, what it does and how many arguments it takes. The daemon
//! dispatches over it and checks argument counts against it; `help` prints
//! it.

/// One command: how it is written, what it does, how many arguments.
pub struct CmdSpec {
    pub name: &'static str,
    pub syntax: &'static str,
    pub help: &'static str,
    pub min: usize,
    /// `None`: no upper bound.
    pub max: Option<usize>,
}

macro_rules! commands {
    ($( $name:literal, $syntax:literal, $min:literal, $max:expr, $help:literal; )*) => {
        pub static COMMANDS: &[CmdSpec] = &[
            $( CmdSpec { name: $name, syntax: $syntax, help: $help, min: $min, max: $max }, )*
        ];
    };
}

commands! {
    "auth", "auth <response>", 1, Some(1), "Authenticate.";
    "backend.list", "backend.list [-j] [-p] [<backend_pattern>]", 0, Some(3),
        "List backends.\n-p also shows probe status.\n-j specifies JSON output.";
    "backend.set_health", "backend.set_health <backend_pattern> [auto|healthy|sick]", 2, Some(2),
        "Set health status of backend(s) matching <backend_pattern>.";
    "ban", "ban <field> <operator> <arg> [&& <field> <oper> <arg> ...]", 3, None,
        "Mark obsolete all objects where all the conditions match.";
    "ban.list", "ban.list [-j]", 0, Some(1), "List the active bans.";
    "banner", "banner", 0, Some(0), "Print welcome banner.";
    "debug.xid", "debug.xid [<xid>]", 0, Some(1),
        "Examine or set the next transaction id (for predictable logs in tests).";
    "help", "help [-j|<command>]", 0, Some(2), "Show command/protocol help.";
    "panic.clear", "panic.clear [-z]", 0, Some(1), "Clear the last panic, if any.";
    "panic.show", "panic.show [-j]", 0, Some(1), "Return the last panic, if any.";
    "param.reset", "param.reset <param>", 1, Some(1), "Reset parameter to default value.";
    "param.set", "param.set [-j] <param> <value>", 2, Some(3), "Set parameter value.";
    "param.show", "param.show [-l|-j] [<param>|changed]", 0, Some(2),
        "Show parameters and their values.\nThe long form with -l shows documentation, minimum, maximum and default values.";
    "pid", "pid [-j]", 0, Some(1), "Show the pid of the process.";
    "ping", "ping [-j] [<timestamp>]", 0, Some(2), "Keep connection alive.";
    "quit", "quit", 0, Some(0), "Close connection.";
    "start", "start", 0, Some(0), "Start accepting client connections.";
    "status", "status [-j]", 0, Some(1), "Check status of the cache.";
    "stop", "stop", 0, Some(0), "Stop accepting client connections.";
    "storage.list", "storage.list [-j]", 0, Some(1), "List storage devices.";
    "vcl.discard", "vcl.discard <name_pattern>...", 1, None,
        "Unload the named configurations (when possible).";
    "vcl.inline", "vcl.inline <configname> <quoted_VCLstring> [auto|cold|warm]", 2, Some(3),
        "Compile and load the VCL data under the name provided.";
    "vcl.list", "vcl.list [-j]", 0, Some(1), "List all loaded configuration.";
    "vcl.load", "vcl.load <configname> <filename> [auto|cold|warm]", 2, Some(3),
        "Compile and load the VCL file under the name provided.";
    "vcl.show", "vcl.show [-v] [<configname>]", 0, Some(2),
        "Display the source code for the specified configuration.";
    "vcl.state", "vcl.state <configname> [auto|cold|warm]", 2, Some(2),
        "Force the state of the named configuration.";
    "vcl.use", "vcl.use <configname>", 1, Some(1),
        "Switch to the named configuration immediately.";
    "xkey.purge", "xkey.purge <tag>...", 1, None,
        "Purge every object tagged with any of the tags (xkey, Surrogate-Key or Cache-Tag).";
    "xkey.softpurge", "xkey.softpurge <tag>...", 1, None,
        "Make every object tagged with any of the tags stale, keeping it for grace and revalidation.";
}

/// The command of that name.
pub fn find(name: &str) -> Option<&'static CmdSpec> {
    COMMANDS.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_described_once() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert!(c.syntax.starts_with(c.name), "{}", c.name);
            assert!(!c.help.is_empty());
            assert!(!matches!(c.max, Some(m) if m < c.min));
            assert!(
                COMMANDS[..i].iter().all(|o| o.name != c.name),
                "{} twice",
                c.name
            );
        }
        assert_eq!(find("vcl.load").unwrap().min, 2);
        assert!(find("nosuch").is_none());
    }
}
