//! What the dashboard may change, and only when started with
//! `--dashboard-secret FILE`: a ban, a purge by tag, a backend's health,
//! the active program. Each action proves it knows the secret as the
//! management interface's `auth` does: it asks `/challenge` for 32 fresh
//! letters and answers with SHA-256 over challenge, newline, the file's
//! bytes, challenge, newline. A challenge answers once and for a minute,
//! so a request seen on the wire cannot be played again, and a page on
//! another site cannot act without the secret. The command then runs
//! through the management command table, as `lacquer adm` would run it.

use crate::mgmt::Mgmt;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The commands the dashboard may run.
pub(crate) const ALLOWED: &[&str] = &[
    "ban",
    "xkey.purge",
    "xkey.softpurge",
    "backend.set_health",
    "vcl.use",
];

/// Challenges given and not yet answered, at most.
const OUTSTANDING: usize = 64;
/// How long a challenge may be answered.
const CHALLENGE_LIFE: Duration = Duration::from_secs(60);

/// The secret and the way to the command table.
pub(crate) struct Actions {
    mgmt: Arc<Mgmt>,
    secret: Vec<u8>,
    challenges: Mutex<VecDeque<(String, Instant)>>,
}

/// Why an action was not run, or what it answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The command ran: the management status and text.
    Ran(u16, String),
    /// Refused before running: why.
    Refused(&'static str),
}

impl Actions {
    pub fn new(mgmt: Arc<Mgmt>, secret: Vec<u8>) -> Actions {
        Actions {
            mgmt,
            secret,
            challenges: Mutex::new(VecDeque::new()),
        }
    }

    /// A fresh challenge (the oldest outstanding one is forgotten past
    /// the bound).
    pub fn challenge(&self) -> Option<String> {
        let c = lacquer_admin::new_challenge().ok()?;
        let mut all = self.challenges.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(_, at)| at.elapsed() < CHALLENGE_LIFE);
        if all.len() >= OUTSTANDING {
            all.pop_front();
        }
        all.push_back((c.clone(), Instant::now()));
        Some(c)
    }

    /// Whether `response` answers `challenge`, which is used up either
    /// way.
    fn proves(&self, challenge: &str, response: &str) -> bool {
        let mut all = self.challenges.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = all
            .iter()
            .position(|(c, at)| c == challenge && at.elapsed() < CHALLENGE_LIFE)
        else {
            return false;
        };
        all.remove(i);
        let want = lacquer_admin::auth_response(challenge, &self.secret);
        // Compared without stopping at the first difference.
        want.len() == response.len()
            && want
                .bytes()
                .zip(response.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// Runs `command` (one management command line) if the answer is
    /// right and the command is one the dashboard may run.
    pub fn perform(&self, challenge: &str, response: &str, command: &str) -> Outcome {
        if !self.proves(challenge, response) {
            return Outcome::Refused("Authentication failed: ask /challenge again.");
        }
        let Ok(args) = lacquer_admin::tokenize(command) else {
            return Outcome::Refused("The command does not parse.");
        };
        if !args.first().is_some_and(|c| ALLOWED.contains(&c.as_str())) {
            return Outcome::Refused(
                "Only ban, xkey.purge, xkey.softpurge, backend.set_health and vcl.use run here.",
            );
        }
        let reply = self.mgmt.execute(&args);
        Outcome::Ran(reply.status, reply.body)
    }
}
