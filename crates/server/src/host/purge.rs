//! Purges asked for by name rather than by `return (purge)`: every
//! variant under a hash key (vmod purge, hard or soft) and every object
//! carrying a tag (vmod xkey and the `xkey.purge`/`xkey.softpurge` CLI
//! commands), with their counters.

use crate::Shared;
use lacquer_cache::{tags, SoftPurge};
use lacquer_core::counters::{Counter, COUNTERS};

/// Purges the objects under a key; with `soft` (ttl, grace, keep) only
/// shortens their lifetimes. Returns how many objects it acted on.
pub(crate) fn by_key(sh: &Shared, key: &[u8], soft: Option<[f64; 3]>) -> usize {
    match soft {
        None => {
            let n = sh.cache.purge(key);
            COUNTERS.add(Counter::n_obj_purged, n as u64);
            n
        }
        Some([ttl, grace, keep]) => {
            let how = SoftPurge { ttl, grace, keep };
            sh.cache.soft_purge(key, how, lacquer_core::time::now())
        }
    }
}

/// Purges (or soft-purges: stale now, grace and keep left) every object
/// tagged with any of the keys in a white-space or comma separated list.
pub(crate) fn by_tags(sh: &Shared, keys: &[u8], soft: bool) -> usize {
    let now = lacquer_core::time::now();
    let how = soft.then_some(SoftPurge::STALE);
    let n = sh.cache.purge_tags(tags::split(keys), how, now);
    if !soft {
        COUNTERS.add(Counter::n_obj_purged, n as u64);
    }
    n
}
