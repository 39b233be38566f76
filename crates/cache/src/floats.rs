//! Times an object keeps that threads read and set without a lock: an
//! `f64` as its bits, or in single precision, rounded down, where an
//! object's size counts more than the digits (grace and keep).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An `f64` that can be read and written from several threads.
#[derive(Debug)]
pub struct AtomicF64(AtomicU64);

impl AtomicF64 {
    pub fn new(v: f64) -> Self {
        AtomicF64(AtomicU64::new(v.to_bits()))
    }
    #[inline]
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed)
    }
}

/// An `f64` kept as the nearest `f32` at or below it.
#[derive(Debug)]
pub struct AtomicF32(AtomicU32);

impl AtomicF32 {
    pub fn new(v: f64) -> Self {
        AtomicF32(AtomicU32::new(f32_at_or_below(v).to_bits()))
    }
    #[inline]
    pub fn get(&self) -> f64 {
        f64::from(f32::from_bits(self.0.load(Ordering::Relaxed)))
    }
    pub fn set(&self, v: f64) {
        self.0
            .store(f32_at_or_below(v).to_bits(), Ordering::Relaxed)
    }
}

/// The largest `f32` not above `v` (NaN stays NaN).
fn f32_at_or_below(v: f64) -> f32 {
    let f = v as f32;
    if f64::from(f) <= v || f.is_nan() {
        return f;
    }
    // One step down: towards zero for a positive number, away from it
    // for a negative one (below 0 is the smallest negative number).
    let bits = f.to_bits();
    f32::from_bits(if f > 0.0 {
        bits - 1
    } else if f == 0.0 {
        0x8000_0001
    } else {
        bits + 1
    })
}
