//! The `tls.cert.*` commands: list the certificates the TLS listeners
//! offer, stage changes (load, discard) and put them in force or drop
//! them (commit, rollback), or read the `-A` file's certificate files
//! again (reload). New handshakes see a change; established connections
//! carry on with what they began with.

use super::{Mgmt, Reply};
use lacquer_admin::commands::Cmd;
use lacquer_admin::status;

impl Mgmt {
    pub(super) fn tls_cert(&self, cmd: Cmd, args: &[String]) -> Reply {
        let Some(tls) = &self.sh.tls else {
            return Reply::with(status::CANT, "No TLS: the daemon was started without -A");
        };
        let done = |r: Result<String, String>| match r {
            Ok(text) => Reply::ok(text),
            Err(e) => Reply::with(status::CANT, e),
        };
        match cmd {
            Cmd::TlsCertList => Reply::ok(tls.list()),
            Cmd::TlsCertLoad => done(
                tls.load(&args[1], &args[2], args.get(3).map(String::as_str))
                    .map(|()| {
                        format!(
                            "Certificate {} staged (tls.cert.commit to use it)\n",
                            args[1]
                        )
                    }),
            ),
            Cmd::TlsCertDiscard => {
                done(tls.discard(&args[1]).map(|()| {
                    format!("Removal of {} staged (tls.cert.commit to apply)\n", args[1])
                }))
            }
            Cmd::TlsCertCommit => done(tls.commit().map(|()| String::new())),
            Cmd::TlsCertRollback => done(tls.rollback().map(|()| String::new())),
            Cmd::TlsCertReload => done(tls.reload().map(|n| format!("{n} certificates read\n"))),
            _ => Reply::with(status::UNKNOWN, "Unknown request"),
        }
    }
}
