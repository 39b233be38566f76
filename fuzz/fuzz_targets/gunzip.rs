//! Gzip from a backend: the block scanner and the sliced inflater never
//! panic, never hand out a slice much over its limit, and agree with the
//! whole-buffer gunzip.
#![no_main]
#![forbid(unsafe_code)]
use lacquer_filters::gzip::{gunzip, Gunzip};
use lacquer_filters::splice::{scan, strip, Scan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&limit, rest)) = data.split_first() else {
        return;
    };
    let limit = usize::from(limit) * 64 + 1;
    let whole = gunzip(rest);
    let mut z = Gunzip::new();
    let mut out = Vec::new();
    let mut failed = false;
    'pieces: for piece in rest.chunks(97) {
        let mut slices = z.slices(piece, limit);
        loop {
            match slices.next() {
                Ok(Some(s)) => {
                    assert!(s.len() <= limit + 32 * 1024);
                    out.extend_from_slice(&s);
                }
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break 'pieces;
                }
            }
        }
    }
    let sliced = if failed {
        None
    } else {
        z.finish().ok().map(|(tail, _)| {
            out.extend_from_slice(&tail);
            out
        })
    };
    assert_eq!(whole.ok(), sliced);
    let mut s = Scan::new();
    let _ = s.push(rest);
    if let Ok(scanned) = scan(rest) {
        let _ = strip(&[bytes::Bytes::copy_from_slice(rest)], scanned.bits);
    }
});
