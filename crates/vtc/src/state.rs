//! One test's world: its macros, barriers, temporary directory and
//! timeouts, shared with every actor thread. Actors read it; only the top
//! level (`world`) starts actors.

use crate::barrier::Barrier;
use crate::macros::Macros;
use crate::trace::{Fail, Step};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct World {
    pub macros: Macros,
    pub tmpdir: PathBuf,
    /// The `lacquer` binary `varnish vN` starts.
    pub exe: PathBuf,
    /// How long a read waits (`timeout` changes it per connection).
    pub http_timeout: Duration,
    barriers: Mutex<HashMap<String, Arc<Barrier>>>,
}

impl World {
    pub fn new(tmpdir: PathBuf, exe: PathBuf, test_timeout: Duration) -> World {
        World {
            macros: Macros::new(),
            tmpdir,
            exe,
            http_timeout: test_timeout / 2,
            barriers: Mutex::new(HashMap::new()),
        }
    }

    /// Makes `name` a barrier (the top level's `barrier` command).
    pub fn define_barrier(&self, name: &str, barrier: Arc<Barrier>) {
        self.barriers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), barrier);
    }

    pub fn barrier(&self, name: &str) -> Step<Arc<Barrier>> {
        self.barriers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| Fail(format!("Barrier {name} is not defined")))
    }
}
