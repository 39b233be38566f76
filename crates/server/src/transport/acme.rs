//! The daemon's side of ACME: one thread that keeps each `acme` section's
//! certificate obtained and renewed (when it is within the section's
//! `renew-before` of its end, or missing, or unreadable), puts a new one
//! in force for new handshakes as `tls.cert.reload` would, and after a
//! failure tries again once the section's `retry` time has passed.

use crate::transport::tls::TlsState;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_tls::acme::{self, AcmeSpec};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// When a section's certificate is next due: its renewal time, or now
/// when the kept one cannot be loaded.
fn due(spec: &AcmeSpec, dir: &Path) -> i64 {
    let pem = lacquer_tls::PemSpec {
        cert: spec.file(dir),
        ..lacquer_tls::PemSpec::default()
    };
    match lacquer_tls::load_cert(&spec.id(), &pem) {
        Ok(_) => acme::due(spec, dir),
        Err(_) => 0,
    }
}

/// The key authorization an ACME server's HTTP-01 request for `url`
/// gets, while a challenge is pending (the daemon registers it as its
/// answer before VCL, `Shared::answer_first`).
pub(crate) fn http01_answer(url: &[u8]) -> Option<String> {
    acme::CHALLENGES.http_answer(url)
}

/// Starts the thread when the `-A` file has `acme` sections. The ACME
/// server's certificate is checked against the section's `ca-file`, else
/// the `ssl_ca_file` parameter's bundle as it is at each attempt.
pub(crate) fn spawn_renewals(sh: Arc<crate::Shared>) -> Result<(), String> {
    if sh.tls.as_ref().is_none_or(|t| t.acme().0.is_empty()) {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("lacquer-acme".into())
        .spawn(move || {
            if let Some(tls) = &sh.tls {
                renew_due(tls, &sh.params)
            }
        })
        .map(|_| ())
        .map_err(|e| format!("Cannot start the ACME thread: {e}"))
}

fn renew_due(tls: &TlsState, params: &lacquer_core::params::Params) {
    let (specs, dir) = tls.acme();
    let mut next: Vec<i64> = specs.iter().map(|s| due(s, dir)).collect();
    loop {
        for (spec, next) in specs.iter().zip(next.iter_mut()) {
            if *next > now() {
                continue;
            }
            let name = &spec.names[0];
            let ca = params.ssl_ca_file();
            let mut say = |what: &str| say!("Info: ACME {name}: {what}");
            let got = acme::obtain(spec, dir, Path::new(&*ca), &mut say).and_then(|file| {
                lacquer_tls::load_cert(
                    &spec.id(),
                    &lacquer_tls::PemSpec {
                        cert: file,
                        ..lacquer_tls::PemSpec::default()
                    },
                )
            });
            let retry = spec.retry.as_secs().max(1) as i64;
            match got {
                Ok(cert) => {
                    tls.install(cert);
                    COUNTERS.inc(Counter::tls_acme_issued);
                    say!("Info: ACME {name}: certificate in force");
                    // A certificate that lives shorter than renew-before
                    // is renewed halfway through its life, not at once.
                    let due = acme::due(spec, dir);
                    let end = due + spec.renew_before.as_secs() as i64;
                    *next = due.max(now() + ((end - now()) / 2).max(retry));
                }
                Err(e) => {
                    COUNTERS.inc(Counter::tls_acme_fail);
                    say!("Error: ACME {name}: {e}; trying again in {retry} s");
                    *next = now() + retry;
                }
            }
        }
        let soonest = next.iter().copied().min().unwrap_or(i64::MAX);
        let wait = (soonest - now()).clamp(1, 3600) as u64;
        std::thread::sleep(Duration::from_secs(wait));
    }
}
