//! Who holds the work directory and as whom the daemon serves: the lock
//! that keeps a second daemon out of a live one's directory (`_.pid`, as
//! varnishd keeps it), and the jail (`-j`) the daemon enters once its
//! sockets are bound, which gives the directory to the jail's user.

use crate::daemon::config::{Jail, ServeConfig};
use crate::transport::sockopt;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The name of the lock file in the work directory.
pub(crate) const PID_FILE: &str = "_.pid";

/// Takes the work directory for this process: `_.pid` locked and holding
/// this process's id. A directory whose daemon is alive is refused with
/// its pid; one whose daemon died (the lock went with it) is taken over.
/// The lock lasts while the returned file is open.
pub(crate) fn claim(workdir: &Path) -> Result<std::fs::File, String> {
    let path = workdir.join(PID_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(&path)
        .map_err(|e| format!("Could not open pid-file ({}): {e}", path.display()))?;
    let locked = sockopt::try_lock(&file)
        .map_err(|e| format!("Could not lock pid-file ({}): {e}", path.display()))?;
    if !locked {
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let pid = match text.trim() {
            "" => "unknown",
            pid => pid,
        };
        return Err(format!(
            "Lacquer is already running (pid={pid}) (pidfile={})",
            path.display()
        ));
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes()));
    written.map_err(|e| format!("Could not write pid-file ({}): {e}", path.display()))?;
    Ok(file)
}

/// Makes the work directory and takes it (its lock, held while the
/// returned file is open), decides whom the daemon becomes (before
/// anything is bound) and writes `-P`'s pid file.
pub(crate) fn take(cfg: &ServeConfig) -> Result<(std::fs::File, Option<String>), String> {
    std::fs::create_dir_all(&cfg.workdir).map_err(|e| {
        format!(
            "Cannot create work directory {}: {e}",
            cfg.workdir.display()
        )
    })?;
    let lock = claim(&cfg.workdir)?;
    let user = jail_user(&cfg.jail)?;
    if let Some(pid_file) = &cfg.pid_file {
        std::fs::write(pid_file, format!("{}\n", std::process::id()))
            .map_err(|e| format!("Cannot write pid file {}: {e}", pid_file.display()))?;
    }
    Ok((lock, user))
}

/// The user `jail` makes this process become, checked before anything
/// is bound, so that a root daemon with nobody to become stops at once.
pub(crate) fn jail_user(jail: &Jail) -> Result<Option<String>, String> {
    jail.user_to_become(sockopt::effective_uid(), |name| {
        sockopt::user_by_name(name).is_ok()
    })
}

/// Once every socket is bound and the work directory made, becomes
/// `user` for good, giving it the work directory (but not the management
/// secret, which was read already).
pub(crate) fn enter_jail(user_name: &str, workdir: &Path) -> Result<(), String> {
    let user =
        sockopt::user_by_name(user_name).map_err(|e| format!("-j unix,user={user_name}: {e}"))?;
    if sockopt::effective_uid() != 0 {
        if sockopt::effective_uid() == user.uid {
            return Ok(());
        }
        return Err(format!(
            "-j unix: only root can become \"{user_name}\"; start as root or use -j none"
        ));
    }
    let give = |p: &Path| {
        std::os::unix::fs::chown(p, Some(user.uid), Some(user.gid))
            .map_err(|e| format!("-j unix: cannot give {} to {user_name}: {e}", p.display()))
    };
    give(workdir)?;
    if let Ok(entries) = std::fs::read_dir(workdir) {
        for entry in entries.flatten() {
            if entry.file_name() != "_.secret" {
                give(&entry.path())?;
            }
        }
    }
    sockopt::become_user(user.uid, user.gid)
        .map_err(|e| format!("-j unix: cannot become {user_name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_daemons_directory_is_refused_and_a_dead_ones_taken() {
        let dir = std::env::temp_dir().join(format!("lacquer-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let held = claim(&dir).unwrap();
        let pid = std::process::id().to_string();
        assert_eq!(
            std::fs::read_to_string(dir.join(PID_FILE)).unwrap().trim(),
            pid
        );
        // flock(2) locks belong to the open file: a second open, as a
        // second daemon makes, is refused while the first is open.
        let refused = claim(&dir).unwrap_err();
        assert!(
            refused.contains("already running") && refused.contains(&format!("pid={pid}")),
            "{refused}"
        );
        // The holder gone (as a killed daemon's lock goes with it), the
        // directory is taken over, whatever the file says.
        drop(held);
        std::fs::write(dir.join(PID_FILE), "999999999\nstale\n").unwrap();
        let taken = claim(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(PID_FILE)).unwrap(),
            format!("{pid}\n")
        );
        drop(taken);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
