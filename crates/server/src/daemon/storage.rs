//! The stores `-s` asked for, opened at start: memory, a file, or a
//! persistent file whose objects and bans are put back into the cache
//! before the first request; and the persistent stores' regular sync.

use super::config::{StoreKind, StoreSpec};
use lacquer_cache::file::FileEngine;
use lacquer_cache::object::Attr;
use lacquer_cache::persist::{AttrCodec, PersistEngine, Recovery, ATTR_CODEC};
use lacquer_cache::store::Store;
use lacquer_cache::Cache;
use lacquer_filters::esi::{Include, Program, Segment};
use lacquer_filters::splice::{Deflated, GzipBits, Scanned};
use std::sync::Arc;
use std::time::Instant;

/// Seconds between two syncs of the persistent stores' files (a power
/// cut loses at most about this much; a crash of the process loses
/// nothing the kernel was given).
pub(crate) const SYNC_EVERY: u64 = 5;

/// The persistent stores, each with what its file held.
pub(crate) type Recovered = Vec<(Arc<Store>, Recovery)>;

/// Opens every store; the persistent ones with what they held.
pub(crate) fn open_stores(specs: &[StoreSpec]) -> Result<(Vec<Arc<Store>>, Recovered), String> {
    let _ = ATTR_CODEC.set(AttrCodec {
        encode_gzip,
        decode_gzip,
        encode_esi,
        decode_esi,
    });
    let mut stores = Vec::new();
    let mut recoveries = Vec::new();
    for s in specs {
        let store = match &s.kind {
            StoreKind::Malloc => Store::malloc(&s.name, s.budget),
            StoreKind::File(file) => {
                let engine = FileEngine::open(file).map_err(|e| format!("-s {}: {e}", s.name))?;
                let size = engine.size();
                Store::new(&s.name, size, Box::new(engine))
            }
            StoreKind::Persistent(spec) => {
                let (engine, recovery) =
                    PersistEngine::open(spec).map_err(|e| format!("-s {}: {e}", s.name))?;
                let store = Store::self_managed(&s.name, Box::new(engine));
                recoveries.push((store.clone(), recovery));
                store
            }
        };
        stores.push(store);
    }
    Ok((stores, recoveries))
}

/// Puts back what the persistent stores held: every store's bans first,
/// then the objects. Says on standard error what came back and how fast.
pub(crate) fn restore(cache: &Arc<Cache>, recoveries: Recovered) {
    cache.restore_bans(recoveries.iter().flat_map(|(_, r)| r.bans.iter()));
    for (store, recovery) in recoveries {
        let started = Instant::now();
        let (bans, damaged, segments) = (recovery.bans.len(), recovery.damaged, recovery.segments);
        let read = recovery.read_secs;
        let done = cache.restore_objects(&store, recovery, lacquer_core::time::now());
        let secs = read + started.elapsed().as_secs_f64();
        if segments > 0 {
            say!(
                "Storage {} ({}): {} objects recovered ({} expired, {damaged} damaged left out), {bans} bans, in {:.3} s ({:.0} objects/s; reading the file {:.3} s)",
                store.name(),
                store
                    .engine()
                    .as_any()
                    .downcast_ref::<PersistEngine>()
                    .map_or_else(String::new, |p| p.path().display().to_string()),
                done.objects,
                done.expired,
                secs,
                done.objects as f64 / secs.max(1e-6),
                read
            );
        }
    }
    // The records decoded to build the objects are gone; what they held
    // between the objects goes back to the system.
    lacquer_shm::heap::release_free_memory();
}

/// Keeps the persistent stores' files synced, off the workers: every
/// [`SYNC_EVERY`] seconds (`regular`), and sooner for a store more than
/// half of `persistent_unsynced_max` ahead of its disk; passes that
/// parameter on.
pub(crate) fn sync(cache: &Arc<Cache>, unsynced_max: u64, regular: bool) {
    for store in cache.stores() {
        let Some(p) = store.engine().as_any().downcast_ref::<PersistEngine>() else {
            continue;
        };
        p.set_unsynced_max(unsynced_max);
        if regular || p.wants_sync() {
            let store = store.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(p) = store.engine().as_any().downcast_ref::<PersistEngine>() {
                    p.sync();
                }
            });
        }
    }
}

/// What splicing needs of a gzip'd body, as a persistent store writes it.
fn encode_gzip(attr: &Attr) -> Option<Vec<u8>> {
    let s = attr.downcast_ref::<Scanned>()?;
    let mut out = Vec::with_capacity(36);
    for v in [s.bits.start, s.bits.last, s.bits.stop, s.len] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&s.crc.to_le_bytes());
    Some(out)
}

fn decode_gzip(b: &[u8]) -> Option<Attr> {
    if b.len() != 36 {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("eight"));
    let scanned = Scanned {
        bits: GzipBits {
            start: word(0),
            last: word(1),
            stop: word(2),
        },
        len: word(3),
        crc: u32::from_le_bytes(b[32..36].try_into().expect("four")),
    };
    Some(Arc::new(scanned))
}

/// An ESI page's program, as a persistent store writes it: the segments
/// (verbatim ranges and includes) and, for a page stored gzip'd, each
/// verbatim segment's compressed form.
fn encode_esi(attr: &Attr) -> Option<Vec<u8>> {
    let p = attr.downcast_ref::<Program>()?;
    let mut out = Vec::new();
    let word = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    };
    word(&mut out, p.segments.len() as u64);
    for s in &p.segments {
        match s {
            Segment::Verbatim(r) => {
                out.push(0);
                word(&mut out, r.start as u64);
                word(&mut out, r.end as u64);
            }
            Segment::Include(i) => {
                out.push(1 + u8::from(i.onerror_continue) * 2 + u8::from(i.host.is_some()) * 4);
                bytes(&mut out, &i.url);
                if let Some(host) = &i.host {
                    bytes(&mut out, host);
                }
            }
        }
    }
    word(&mut out, p.deflated.len() as u64);
    for d in &p.deflated {
        word(&mut out, d.range.start as u64);
        word(&mut out, d.range.end as u64);
        word(&mut out, d.len);
        out.extend_from_slice(&d.crc.to_le_bytes());
    }
    Some(out)
}

fn decode_esi(b: &[u8]) -> Option<Attr> {
    /// Reads fields off the encoded program, None past its end.
    struct Reader<'a>(&'a [u8]);
    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            if n > self.0.len() {
                return None;
            }
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Some(head)
        }
        fn word(&mut self) -> Option<u64> {
            Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
        }
        fn index(&mut self) -> Option<usize> {
            usize::try_from(self.word()?).ok()
        }
        fn bytes(&mut self) -> Option<Vec<u8>> {
            let n = self.index()?;
            Some(self.take(n)?.to_vec())
        }
    }
    let mut r = Reader(b);
    let mut program = Program::default();
    let segments = r.index()?;
    for _ in 0..segments.min(b.len()) {
        let kind = r.take(1)?[0];
        let segment = if kind == 0 {
            Segment::Verbatim(r.index()?..r.index()?)
        } else {
            let url = r.bytes()?;
            let host = if kind & 4 != 0 {
                Some(r.bytes()?)
            } else {
                None
            };
            Segment::Include(Include {
                url,
                host,
                onerror_continue: kind & 2 != 0,
            })
        };
        program.segments.push(segment);
    }
    let deflated = r.index()?;
    for _ in 0..deflated.min(b.len()) {
        let range = r.index()?..r.index()?;
        let len = r.word()?;
        let crc = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        program.deflated.push(Deflated { range, crc, len });
    }
    if !r.0.is_empty() || program.segments.len() != segments {
        return None;
    }
    Some(Arc::new(program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gzip_attribute_reads_back() {
        let s = Scanned {
            bits: GzipBits {
                start: 80,
                last: 81,
                stop: 1234,
            },
            crc: 0xdead_beef,
            len: 99,
        };
        let attr: Attr = Arc::new(s);
        let back = decode_gzip(&encode_gzip(&attr).unwrap()).unwrap();
        assert_eq!(back.downcast_ref::<Scanned>(), Some(&s));
        assert!(decode_gzip(&[0; 35]).is_none());
    }

    #[test]
    fn an_esi_program_reads_back() {
        let program = Program {
            segments: vec![
                Segment::Verbatim(0..10),
                Segment::Include(Include {
                    url: b"/frag?a=1".to_vec(),
                    host: Some(b"example.com".to_vec()),
                    onerror_continue: true,
                }),
                Segment::Include(Include {
                    url: b"/other".to_vec(),
                    host: None,
                    onerror_continue: false,
                }),
                Segment::Verbatim(40..52),
            ],
            deflated: vec![Deflated {
                range: 3..9,
                crc: 77,
                len: 10,
            }],
        };
        let attr: Attr = Arc::new(program.clone());
        let encoded = encode_esi(&attr).unwrap();
        let back = decode_esi(&encoded).unwrap();
        assert_eq!(back.downcast_ref::<Program>(), Some(&program));
        for cut in 0..encoded.len() {
            assert!(decode_esi(&encoded[..cut]).is_none(), "cut at {cut}");
        }
    }
}
