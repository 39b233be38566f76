//! The `tls.cert.*` commands: list the certificates the TLS listeners
//! offer, stage changes (load, discard) and put them in force or drop
//! them (commit, rollback), or read the `-A` file's certificate files
//! again (reload). New handshakes see a change; established connections
//! carry on with what they began with.

use super::{json, Mgmt, Reply};
use crate::transport::tls::CertRow;
use lacquer_admin::commands::Cmd;
use lacquer_admin::status;

/// An expiry as OpenSSL prints it (`Feb 29 13:38:00 2042 GMT`).
fn expiry(t: Option<i64>) -> String {
    let Some(t) = t.filter(|t| *t >= 0) else {
        return "-".into();
    };
    // From "Sun, 29 Feb 2042 13:38:00 GMT".
    let date = lacquer_core::time::http_date(t as f64);
    match date
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()[..]
    {
        [_, day, month, year, time, zone] => {
            format!(
                "{month} {:>2} {time} {year} {zone}",
                day.trim_start_matches('0')
            )
        }
        _ => date,
    }
}

/// `tls.cert.list`: a line for each name of each certificate, as Varnish
/// Enterprise lists them (the frontend is `default` for the `-A` file's
/// global certificates), those in force before those staged.
fn list_text(rows: &[CertRow]) -> String {
    let mut table = vec![[
        "Frontend".to_string(),
        "State".into(),
        "Hostname".into(),
        "Certificate ID".into(),
        "Expiration date".into(),
        "OCSP stapling".into(),
    ]];
    let (in_force, staged): (Vec<&CertRow>, Vec<&CertRow>) = rows.iter().partition(|r| !r.staged);
    for r in in_force.into_iter().chain(staged) {
        let frontend = match r.global {
            true => "default".to_string(),
            false => r.listeners.join(","),
        };
        for name in &r.names {
            table.push([
                frontend.clone(),
                if r.staged { "staged" } else { "active" }.into(),
                name.clone(),
                r.id.clone(),
                expiry(r.not_after),
                r.ocsp.to_string(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| table.iter().map(|row| row[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
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
                "  {{\n    \"id\": {},\n    \"state\": \"{}\",\n    \"listeners\": {},\n    \"file\": {},\n    \"names\": {},\n    \"not_after\": {},\n    \"expires\": {},\n    \"ocsp_stapling\": {}\n  }}",
                json::string(&r.id),
                if r.staged { "staged" } else { "active" },
                strings(&r.listeners),
                json::string(&r.file),
                strings(&r.names),
                r.not_after.map_or("null".to_string(), |t| t.to_string()),
                json::string(&expiry(r.not_after)),
                r.ocsp
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_as_varnish_enterprise_lists_them() {
        assert_eq!(
            expiry(Some(2_277_158_400 + 13 * 3600 + 38 * 60)),
            "Feb 28 13:38:00 2042 GMT"
        );
        assert_eq!(expiry(Some(1_767_225_600)), "Jan  1 00:00:00 2026 GMT");
        assert_eq!(expiry(None), "-");
        let row = |id: &str, names: &[&str], staged: bool, global: bool| CertRow {
            id: id.into(),
            listeners: vec!["tls1".into()],
            file: format!("/etc/tls/{id}.pem"),
            names: names.iter().map(|n| n.to_string()).collect(),
            staged,
            not_after: Some(1_767_225_600),
            ocsp: !global,
            global,
        };
        let text = list_text(&[
            row("staged1", &["new.example"], true, true),
            row("cert0", &["example.com", "www.example.com"], false, true),
            row("own", &["own.example"], false, false),
        ]);
        assert_eq!(
            text,
            "Frontend  State   Hostname         Certificate ID  Expiration date           OCSP stapling\n\
             default   active  example.com      cert0           Jan  1 00:00:00 2026 GMT  false\n\
             default   active  www.example.com  cert0           Jan  1 00:00:00 2026 GMT  false\n\
             tls1      active  own.example      own             Jan  1 00:00:00 2026 GMT  true\n\
             default   staged  new.example      staged1         Jan  1 00:00:00 2026 GMT  false\n"
        );
    }
}
