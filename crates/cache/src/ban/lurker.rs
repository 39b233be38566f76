//! The ban lurker: tests the objects in the cache against `obj.*`-only
//! bans in the background, so that banned objects leave memory without
//! waiting for a lookup, and bans can be completed and deleted. It also
//! enforces `ban_cutoff`. Paced by `ban_lurker_batch`/`ban_lurker_sleep`;
//! it waits `ban_lurker_holdoff` before taking a shard lookups are using.

use super::{Ban, BanRef};
use crate::object::Object;
use crate::{Cache, Removal};
use lacquer_core::counters::{Counter, COUNTERS};
use std::sync::atomic::Ordering;
use std::sync::{Arc, TryLockError};
use std::time::Duration;

/// The lurker's parameters, read afresh for every pass.
#[derive(Debug, Clone, Copy)]
pub struct LurkConfig {
    /// `ban_lurker_age`: bans younger than this are left to lookups.
    pub age: f64,
    /// `ban_lurker_batch`.
    pub batch: u64,
    /// `ban_lurker_sleep`.
    pub sleep: f64,
    /// `ban_lurker_holdoff`.
    pub holdoff: f64,
    /// `ban_cutoff` (0: off).
    pub cutoff: u64,
}

impl Cache {
    /// One pass of the lurker at time `now`: tests every object older than
    /// the eligible bans against them, kills the banned, moves the rest
    /// forward in the ban list, marks the bans completed and deletes the
    /// bans nothing needs. Returns how many objects it examined.
    pub fn lurk_bans(&self, cfg: &LurkConfig, now: f64) -> u64 {
        self.bans.clean_tail();
        let (targets, cutoff_seq) = {
            let list = self.bans.lock();
            let targets: Vec<Arc<Ban>> = list
                .iter()
                .filter(|b| {
                    b.spec.is_some() && !b.uses_req && !b.is_completed() && now - b.time >= cfg.age
                })
                .cloned()
                .collect();
            let cutoff = cfg.cutoff as usize;
            let cutoff_seq = if cutoff > 0 && list.len() > cutoff {
                list[list.len() - cutoff].seq
            } else {
                0
            };
            (targets, cutoff_seq)
        };
        if targets.is_empty() && cutoff_seq == 0 {
            return 0;
        }
        for t in &targets {
            t.lurking.store(true, Ordering::SeqCst);
        }
        let upto = targets
            .iter()
            .map(|t| t.seq)
            .max()
            .unwrap_or(0)
            .max(cutoff_seq);
        let mut examined = 0u64;
        let mut in_batch = 0u64;
        for shard in 0..self.index.shards().len() {
            for obj in self.older_objects(shard, upto, cfg.holdoff) {
                examined += 1;
                in_batch += 1;
                if in_batch >= cfg.batch && cfg.sleep > 0.0 {
                    in_batch = 0;
                    std::thread::sleep(Duration::from_secs_f64(cfg.sleep));
                }
                self.lurk_object(&obj, &targets, cutoff_seq);
            }
        }
        for t in &targets {
            t.complete();
        }
        self.bans.clean_tail();
        examined
    }

    /// The objects in one shard whose place in the ban list is before
    /// `upto`. Waits `holdoff` for the shard if lookups hold it.
    fn older_objects(&self, shard: usize, upto: u64, holdoff: f64) -> Vec<Arc<Object>> {
        let map = match self.index.shards()[shard].try_lock() {
            Ok(map) => map,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                COUNTERS.inc(Counter::bans_lurker_contention);
                if holdoff > 0.0 {
                    std::thread::sleep(Duration::from_secs_f64(holdoff));
                }
                self.index.shards()[shard]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            }
        };
        map.iter()
            .flat_map(|h| h.objs().iter())
            .filter(|o| o.ban_seq() < upto && !o.is_removed())
            .cloned()
            .collect()
    }

    fn lurk_object(&self, obj: &Arc<Object>, targets: &[Arc<Ban>], cutoff_seq: u64) {
        if obj.is_removed() {
            return;
        }
        let seq = obj.ban_seq();
        if seq < cutoff_seq {
            self.remove(obj, Removal::Banned);
            COUNTERS.inc(Counter::bans_lurker_obj_killed_cutoff);
            return;
        }
        let mut tests = 0;
        let mut tested = false;
        let killed = targets.iter().filter(|t| t.seq > seq).any(|t| {
            tested = true;
            t.matches(obj, None, &mut tests)
        });
        if tested {
            COUNTERS.inc(Counter::bans_lurker_tested);
            COUNTERS.add(Counter::bans_lurker_tests_tested, tests);
        }
        if killed {
            self.remove(obj, Removal::Banned);
            COUNTERS.inc(Counter::bans_lurker_obj_killed);
            return;
        }
        // Move forward over every ban it no longer needs testing against:
        // completed ones and the ones just tested.
        let next = {
            let list = self.bans.lock();
            list.iter()
                .skip_while(|b| b.seq <= seq)
                .take_while(|b| b.is_completed() || b.lurking.load(Ordering::SeqCst))
                .last()
                .map(BanRef::new)
        };
        if let Some(next) = next {
            obj.set_ban(next);
        }
    }
}
