//! The `tls.cert.*` commands: list the certificates the TLS listeners
//! offer, stage changes (load, discard) and put them in force or drop
//! them (commit, rollback), or read the `-A` file's certificate files
//! again (reload). New handshakes see a change; established connections
//! carry on with what they began with.

use super::{json, Mgmt, Reply};
use crate::transport::tls::CertRow;
use lacquer_admin::commands::Cmd;
use lacquer_admin::status;

/// `tls.cert.list`: the certificates in force, then the set staged.
fn list_text(rows: &[CertRow]) -> String {
    let mut out = format!("{:<24} {:<10} {:<40} names\n", "id", "listeners", "file");
    let (in_force, staged): (Vec<&CertRow>, Vec<&CertRow>) = rows.iter().partition(|r| !r.staged);
    for r in in_force {
        out.push_str(&format!(
            "{:<24} {:<10} {:<40} {}\n",
            r.id,
            r.listeners.join(","),
            r.file,
            r.names.join(",")
        ));
    }
    if !staged.is_empty() {
        out.push_str("staged (tls.cert.commit to use, tls.cert.rollback to drop):\n");
        for r in staged {
            out.push_str(&format!("  {} {}\n", r.id, r.file));
        }
    }
    out
}

/// `tls.cert.list -j`: one object a certificate.
fn list_json(rows: &[CertRow], args: &[String]) -> String {
    let strings = |v: &[String]| {
        let v: Vec<String> = v.iter().map(|s| json::string(s)).collect();
        format!("[{}]", v.join(", "))
    };
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "  {{\n    \"id\": {},\n    \"state\": \"{}\",\n    \"listeners\": {},\n    \"file\": {},\n    \"names\": {}\n  }}",
                json::string(&r.id),
                if r.staged { "staged" } else { "active" },
                strings(&r.listeners),
                json::string(&r.file),
                strings(&r.names)
            )
        })
        .collect();
    json::items(1, args, &items)
}

impl Mgmt {
    pub(super) fn tls_cert(&self, cmd: Cmd, json_out: bool, args: &[String]) -> Reply {
        let Some(tls) = &self.sh.tls else {
            return Reply::with(status::CANT, "No TLS: the daemon was started without -A");
        };
        let done = |r: Result<String, String>| match r {
            Ok(text) => Reply::ok(text),
            Err(e) => Reply::with(status::CANT, e),
        };
        match cmd {
            Cmd::TlsCertList if json_out => Reply::ok(list_json(&tls.list(), args)),
            Cmd::TlsCertList => Reply::ok(list_text(&tls.list())),
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
