//! vmod vsthrottle, as varnish-modules has it: rate limits by key, each
//! a token bucket of `limit` tokens refilled over `period`, shared by
//! every request. `is_denied(key, limit, period, block)` takes a token or
//! says no (and with `block`, keeps saying no for that long);
//! `remaining` and `blocked` look without taking. Buckets full again are
//! forgotten, so memory follows the keys in use.

use crate::types::scope::ALL;
use crate::types::{Type, Value};
use crate::vmod::{dflt, func, req, Ctx, Dflt, FuncSpec, Param, Vmod};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

type R = Result<Value, crate::failure::VclFailure>;

/// One bucket: its tokens when last looked at, and until when it blocks.
struct Bucket {
    tokens: f64,
    last: f64,
    blocked_until: f64,
}

type Key = (Vec<u8>, i64, u64, u64);

const SHARDS: usize = 16;

fn shards() -> &'static [Mutex<HashMap<Key, Bucket>>; SHARDS] {
    static BUCKETS: OnceLock<[Mutex<HashMap<Key, Bucket>>; SHARDS]> = OnceLock::new();
    BUCKETS.get_or_init(Default::default)
}

/// Runs `f` on the bucket of these arguments, refilled to `now`.
fn with_bucket<T>(a: &[Value], f: impl FnOnce(&mut Bucket, f64, i64) -> T) -> T {
    let limit = a[1].as_i64().max(0);
    let period = a[2].as_f64().max(0.001);
    let block = a.get(3).map_or(0.0, |b| b.as_f64().max(0.0));
    let now = lacquer_core::time::now();
    let key: Key = (
        a[0].as_bytes().to_vec(),
        limit,
        period.to_bits(),
        block.to_bits(),
    );
    let shard = &shards()[crate::vmod::hash64(&key.0) as usize % SHARDS];
    let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() > 4096 {
        // Forget buckets that have filled up again and block nothing.
        map.retain(|(_, l, p, _), b| {
            let refill = (now - b.last) * (*l as f64) / f64::from_bits(*p);
            b.tokens + refill < *l as f64 || b.blocked_until > now
        });
    }
    let bucket = map.entry(key).or_insert(Bucket {
        tokens: limit as f64,
        last: now,
        blocked_until: 0.0,
    });
    bucket.tokens = (bucket.tokens + (now - bucket.last) * limit as f64 / period).min(limit as f64);
    bucket.last = now;
    let out = f(bucket, now, limit);
    if block > 0.0 && bucket.tokens < 1.0 && bucket.blocked_until <= now {
        bucket.blocked_until = now + block;
    }
    out
}

fn is_denied(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Bool(with_bucket(a, |b, now, _| {
        if b.blocked_until > now || b.tokens < 1.0 {
            return true;
        }
        b.tokens -= 1.0;
        false
    })))
}

fn remaining(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Int(with_bucket(a, |b, _, _| {
        b.tokens.floor() as i64
    })))
}

fn blocked(_: &mut Ctx<'_>, a: &[Value]) -> R {
    Ok(Value::Duration(with_bucket(a, |b, now, _| {
        (b.blocked_until - now).max(0.0)
    })))
}

const KEY: Param = req("key", Type::String);
const LIMIT: Param = req("limit", Type::Int);
const PERIOD: Param = req("period", Type::Duration);
const BLOCK: Param = dflt("block", Type::Duration, Dflt::Duration(0.0));

static FUNCTIONS: &[FuncSpec] = &[
    func(
        "vsthrottle",
        "is_denied",
        &[KEY, LIMIT, PERIOD, BLOCK],
        Type::Bool,
        ALL,
        is_denied,
    ),
    func(
        "vsthrottle",
        "remaining",
        &[KEY, LIMIT, PERIOD, BLOCK],
        Type::Int,
        ALL,
        remaining,
    ),
    func(
        "vsthrottle",
        "blocked",
        &[KEY, LIMIT, PERIOD, req("block", Type::Duration)],
        Type::Duration,
        ALL,
        blocked,
    ),
];

pub const VMOD: Vmod = Vmod {
    name: "vsthrottle",
    functions: FUNCTIONS,
    classes: &[],
};
