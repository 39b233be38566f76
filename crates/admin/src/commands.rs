//! The command table: every management command once, with how it is
//! written, what it does and how many arguments it takes. The daemon
//! dispatches over it and checks argument counts against it; `help` prints
//! it.

/// One command: which it is, how it is written, what it does, how many
/// arguments.
pub struct CmdSpec {
    pub cmd: Cmd,
    pub name: &'static str,
    pub syntax: &'static str,
    pub help: &'static str,
    pub min: usize,
    /// `None`: no upper bound.
    pub max: Option<usize>,
}

macro_rules! commands {
    ($( $cmd:ident = $name:literal, $syntax:literal, $min:literal, $max:expr, $help:literal; )*) => {
        /// Every management command, so that dispatching over them is an
        /// exhaustive `match`: a command added to the table does not
        /// compile until the daemon handles it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Cmd {
            $( $cmd, )*
        }

        pub static COMMANDS: &[CmdSpec] = &[
            $( CmdSpec { cmd: Cmd::$cmd, name: $name, syntax: $syntax, help: $help, min: $min, max: $max }, )*
        ];
    };
}

commands! {
    Auth = "auth", "auth <response>", 1, Some(1), "Authenticate.";
    BackendList = "backend.list", "backend.list [-j] [-p] [<backend_pattern>]", 0, Some(3),
        "List backends.\n-p also shows probe status.\n-j specifies JSON output.";
    BackendSetHealth = "backend.set_health", "backend.set_health <backend_pattern> [auto|healthy|sick]", 2, Some(2),
        "Set health status of backend(s) matching <backend_pattern>.";
    Ban = "ban", "ban <field> <operator> <arg> [&& <field> <oper> <arg> ...]", 3, None,
        "Mark obsolete all objects where all the conditions match.";
    BanList = "ban.list", "ban.list [-j]", 0, Some(1), "List the active bans.";
    Banner = "banner", "banner", 0, Some(0), "Print welcome banner.";
    ClusterList = "cluster.list", "cluster.list [-j]", 0, Some(1),
        "List the nodes of the cluster: each one's state, addresses and share of the keys.";
    DebugClusterCut = "debug.cluster.cut", "debug.cluster.cut on|off", 1, Some(1),
        "Cut this node off from its cluster (every cluster datagram in and out dropped, no peer asked or answered), or restore it: what a partition does, for tests.";
    DebugWorkerStall = "debug.worker.stall", "debug.worker.stall <worker> <seconds>", 2, Some(2),
        "Hold a client worker's event loop for some seconds (at most 60), as a long piece of work would: for tests of how its connections are served meanwhile.";
    DebugXid = "debug.xid", "debug.xid [<xid>]", 0, Some(1),
        "Examine or set the next transaction id (for predictable logs in tests).";
    Help = "help", "help [-j|<command>]", 0, Some(2), "Show command/protocol help.";
    PanicClear = "panic.clear", "panic.clear [-z]", 0, Some(1), "Clear the last panic, if any.";
    PanicShow = "panic.show", "panic.show [-j]", 0, Some(1), "Return the last panic, if any.";
    ParamReset = "param.reset", "param.reset <param>", 1, Some(1), "Reset parameter to default value.";
    ParamSet = "param.set", "param.set [-j] <param> <value>", 2, Some(3), "Set parameter value.";
    ParamShow = "param.show", "param.show [-l|-j] [<param>|changed]", 0, Some(2),
        "Show parameters and their values.\nThe long form with -l shows documentation, minimum, maximum and default values.";
    Pid = "pid", "pid [-j]", 0, Some(1), "Show the pid of the process.";
    Ping = "ping", "ping [-j] [<timestamp>]", 0, Some(2), "Keep connection alive.";
    Quit = "quit", "quit", 0, Some(0), "Close connection.";
    Start = "start", "start", 0, Some(0), "Start accepting client connections.";
    Status = "status", "status [-j]", 0, Some(1), "Check status of the cache.";
    Stop = "stop", "stop", 0, Some(0), "Stop accepting client connections.";
    StorageList = "storage.list", "storage.list [-j]", 0, Some(1), "List storage devices.";
    TlsCertCommit = "tls.cert.commit", "tls.cert.commit", 0, Some(0),
        "Put the staged certificate changes in force for new TLS handshakes.";
    TlsCertDiscard = "tls.cert.discard", "tls.cert.discard <id>", 1, Some(1),
        "Stage the removal of a certificate.";
    TlsCertList = "tls.cert.list", "tls.cert.list [-j]", 0, Some(1),
        "List the certificates in force, their listeners and names, and what is staged.";
    TlsCertLoad = "tls.cert.load", "tls.cert.load <id> <pemfile> [<keyfile>]", 2, Some(3),
        "Stage a certificate: key and chain in one PEM file, or the key apart.";
    TlsCertReload = "tls.cert.reload", "tls.cert.reload", 0, Some(0),
        "Read every certificate file of the -A file again; if one is broken, nothing changes.";
    TlsCertRollback = "tls.cert.rollback", "tls.cert.rollback", 0, Some(0),
        "Drop the staged certificate changes.";
    VclDeps = "vcl.deps", "vcl.deps [-j]", 0, Some(1),
        "List all loaded configuration and their dependencies.";
    VclDiscard = "vcl.discard", "vcl.discard <name_pattern>...", 1, None,
        "Unload the named configurations (when possible).";
    VclInline = "vcl.inline", "vcl.inline <configname> <quoted_VCLstring> [auto|cold|warm]", 2, Some(3),
        "Compile and load the VCL data under the name provided.";
    VclLabel = "vcl.label", "vcl.label <label> <configname>", 2, Some(2),
        "Apply label to configuration.";
    VclList = "vcl.list", "vcl.list [-j]", 0, Some(1), "List all loaded configuration.";
    VclLoad = "vcl.load", "vcl.load <configname> <filename> [auto|cold|warm]", 2, Some(3),
        "Compile and load the VCL file under the name provided.";
    VclShow = "vcl.show", "vcl.show [-v] [<configname>]", 0, Some(2),
        "Display the source code for the specified configuration.";
    VclSymtab = "vcl.symtab", "vcl.symtab", 0, Some(0),
        "Dump the dependencies between loaded configurations and labels.";
    VclState = "vcl.state", "vcl.state <configname> [auto|cold|warm]", 2, Some(2),
        "Force the state of the named configuration.";
    VclUse = "vcl.use", "vcl.use <configname>", 1, Some(1),
        "Switch to the named configuration immediately.";
    XkeyPurge = "xkey.purge", "xkey.purge <tag>...", 1, None,
        "Purge every object tagged with any of the tags (xkey, Surrogate-Key or Cache-Tag).";
    XkeySoftpurge = "xkey.softpurge", "xkey.softpurge <tag>...", 1, None,
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
