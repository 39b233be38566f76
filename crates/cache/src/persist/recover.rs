//! Opening a persistent store: a new file gets a superblock; an existing
//! one is read back. Segments are walked in the order they were written,
//! frame by frame; a record whose checksum fails, or whose body is not
//! what it was (a torn write, a flipped bit, a segment written over), is
//! left out and counted, and everything else comes back. A file of
//! another format, another size, or another program is refused with a
//! message rather than overwritten.

use super::format::{
    self, BadSuperblock, FrameHeader, Record, Superblock, FRAME_HEADER_LEN, LIVE,
    SEGMENT_HEADER_LEN, SUPERBLOCK_LEN, TAG_BAN, TAG_BODY, TAG_OBJECT, TAG_RENDITION,
};
use super::{Head, Log, PersistEngine, PersistSpec, Segment};
use crate::file::open_file;
use crate::space::FileSpace;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a store's file held at start.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Live records, in the order they were written.
    pub(crate) objects: Vec<Found>,
    /// Bans (time, text), in the order they were written.
    pub bans: Vec<(f64, String)>,
    /// Renditions: the object frame each names, and its own frame.
    pub(crate) renditions: Vec<(u64, u64)>,
    /// Records left out as damaged.
    pub damaged: u64,
    /// Segments found written.
    pub segments: usize,
    /// Seconds spent reading the file (walking and checking).
    pub read_secs: f64,
}

/// A live record found by the walk: where it is and what deciding its
/// fate needs before the object is asked for. Its body is checked when
/// the object is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    /// The record's frame.
    pub at: u64,
    pub inserted: f64,
    /// When its lifetime ends.
    pub expires: f64,
    /// The segment, of those holding the record and its body, written
    /// first: the record goes when that one is reused.
    pub oldest: u32,
    /// Its head names surrogate keys (a tag purge must find it).
    pub tagged: bool,
}

impl Recovery {
    /// Live records found.
    pub fn objects(&self) -> usize {
        self.objects.len()
    }
}

/// The segment size for a file: about a sixty-fourth of it, between
/// 256 KiB and 64 MiB, in whole pages.
fn segment_len_for(size: u64) -> u64 {
    let per = (size.saturating_sub(SUPERBLOCK_LEN) / 64) / 4096 * 4096;
    per.clamp(256 << 10, 64 << 20)
}

/// A secret for a new store, from the process's random hash keys.
fn new_secret() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish() | 1
}

impl PersistEngine {
    /// Opens the store's file, making it when new, and reads back what
    /// it holds.
    pub fn open(spec: &PersistSpec) -> Result<(PersistEngine, Recovery), String> {
        let (file, path) = open_file(&spec.path)?;
        let shown = path.display().to_string();
        let existing = file.metadata().map(|m| m.len()).unwrap_or(0);
        // What there is of a superblock (a short file that is not all
        // zeros is someone else's, and refused).
        let mut sb_bytes = vec![0u8; 64];
        let have = existing.min(64) as usize;
        if have > 0 {
            use std::os::unix::fs::FileExt;
            file.read_exact_at(&mut sb_bytes[..have], 0)
                .map_err(|e| format!("{shown}: cannot read: {e}"))?;
        }
        let (sb, fresh) = match Superblock::decode(&sb_bytes) {
            Ok(sb) => {
                if sb.file_len != spec.size {
                    return Err(format!(
                        "{shown}: the store was made {} bytes long, not {}: give its size or remove the file",
                        sb.file_len, spec.size
                    ));
                }
                if existing < sb.file_len {
                    // Cut short: what is past the end is lost, the rest
                    // is read.
                    file.set_len(sb.file_len)
                        .map_err(|e| format!("{shown}: cannot extend: {e}"))?;
                }
                (sb, false)
            }
            Err(BadSuperblock::Empty) => {
                let size = spec.size;
                if size < 4 * (256 << 10) + SUPERBLOCK_LEN {
                    return Err(format!("{shown}: a persistent store needs at least 2m"));
                }
                let sb = Superblock {
                    version: format::VERSION,
                    file_len: size,
                    segment_len: segment_len_for(size),
                    secret: new_secret(),
                };
                (sb, true)
            }
            Err(BadSuperblock::Foreign) => {
                return Err(format!(
                    "{shown}: not a Lacquer persistent store; remove it or choose another path"
                ))
            }
            Err(BadSuperblock::Version(v)) => {
                return Err(format!(
                    "{shown}: a store of format version {v}, and this program reads version {}; remove it to start empty",
                    format::VERSION
                ))
            }
            Err(BadSuperblock::Damaged) => {
                return Err(format!(
                    "{shown}: the store's superblock is damaged; remove the file to start empty"
                ))
            }
        };
        if fresh {
            file.set_len(sb.file_len)
                .and_then(|_| lacquer_shm::mapped::preallocate(&file, sb.file_len))
                .map_err(|e| format!("{shown}: cannot set aside {} bytes: {e}", sb.file_len))?;
        }
        let space = FileSpace::new(file, true).map_err(|e| format!("{shown}: cannot map: {e}"))?;
        if fresh {
            space
                .write_at(&sb.encode(), 0)
                .and_then(|_| space.sync())
                .map_err(|e| format!("{shown}: cannot write: {e}"))?;
        }
        let count = ((sb.file_len - SUPERBLOCK_LEN) / sb.segment_len) as usize;
        let segments: Box<[Segment]> = (0..count).map(|_| Segment::default()).collect();
        let log = Log {
            space,
            path,
            secret: sb.secret,
            segment_len: sb.segment_len,
            segments,
            head: Mutex::new(Head {
                current: None,
                at: 0,
                end: 0,
                next_seq: 1,
                order: VecDeque::new(),
                free: Vec::new(),
            }),
            pending: Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            unsynced_max: AtomicU64::new(128 << 20),
            syncing: AtomicBool::new(false),
            objects_written: AtomicU64::new(0),
            content_written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            recovered: AtomicU64::new(0),
            damaged: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            dormant: super::dormant::Dormant::default(),
            renditions: Mutex::new(std::collections::HashMap::new()),
        };
        let started = std::time::Instant::now();
        let mut recovery = log.scan();
        recovery.read_secs = started.elapsed().as_secs_f64();
        log.damaged.store(recovery.damaged, Ordering::Relaxed);
        Ok((PersistEngine { log: Arc::new(log) }, recovery))
    }
}

impl Log {
    /// Walks every written segment in order and sets the head after the
    /// newest one's last frame.
    fn scan(&self) -> Recovery {
        let mut written: Vec<(u64, usize)> = Vec::new();
        let mut free = Vec::new();
        for i in 0..self.segments.len() {
            let start = self.segment_start(i);
            let header = self.space.bytes(start, SEGMENT_HEADER_LEN);
            match format::segment_seq(header, self.secret) {
                Some(seq) => written.push((seq, i)),
                None => free.push(i),
            }
        }
        written.sort_unstable();
        for &(seq, i) in &written {
            self.segments[i].seq.store(seq, Ordering::Relaxed);
            *self.segments[i]
                .oldest
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = f64::INFINITY;
        }
        let mut out = Recovery {
            segments: written.len(),
            ..Recovery::default()
        };
        // The segments are read in runs on as many threads as there are
        // cores, and the runs' findings joined in the order written.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8);
        let run = written.len().div_ceil(threads).max(1);
        let mut last_end = 0;
        let parts: Vec<(Recovery, u64)> = std::thread::scope(|scope| {
            let handles: Vec<_> = written
                .chunks(run)
                .map(|part| {
                    scope.spawn(move || {
                        let mut found = Recovery::default();
                        let mut end = 0;
                        for &(seq, i) in part {
                            end = self.walk(i, seq, &mut found);
                        }
                        (found, end)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        for (found, end) in parts {
            out.objects.extend(found.objects);
            out.bans.extend(found.bans);
            out.renditions.extend(found.renditions);
            out.damaged += found.damaged;
            last_end = end;
        }
        let mut head = self.lock_head();
        free.reverse();
        head.free = free;
        head.next_seq = written.last().map_or(1, |&(s, _)| s + 1);
        head.order = written.iter().map(|&(_, i)| i).collect();
        if let Some(newest) = head.order.pop_back() {
            head.current = Some(newest);
            head.at = last_end;
            head.end = self.segment_start(newest) + self.segment_len;
        }
        out
    }

    /// Walks one segment's frames; returns where the walk ended. Records
    /// are checked (their checksum, and that their body's runs are still
    /// in segments of the numbers they name) but not decoded.
    fn walk(&self, i: usize, seq: u64, out: &mut Recovery) -> u64 {
        let start = self.segment_start(i);
        let end = start + self.segment_len;
        // Read ahead while walking (a cold file would otherwise be read a
        // page at a time); hits read at random again after.
        self.space.reading_in_order(start, self.segment_len, true);
        let walked = self.walk_frames(i, seq, start, end, out);
        self.space.reading_in_order(start, self.segment_len, false);
        walked
    }

    fn walk_frames(&self, i: usize, seq: u64, start: u64, end: u64, out: &mut Recovery) -> u64 {
        let mut at = start + SEGMENT_HEADER_LEN;
        let mut oldest_insert = f64::INFINITY;
        while at + FRAME_HEADER_LEN <= end {
            let raw = self.space.bytes(at, FRAME_HEADER_LEN);
            let h = FrameHeader::decode(raw);
            let len = h.len as u64;
            let next = at + FRAME_HEADER_LEN + format::align(len);
            if h.seq != format::short_seq(seq)
                || !matches!(h.tag, TAG_BODY | TAG_OBJECT | TAG_BAN | TAG_RENDITION)
                || next > end
            {
                break;
            }
            let payload = self.space.bytes(at + FRAME_HEADER_LEN, len);
            if !h.verify(raw, payload, self.secret) {
                if h.tag == TAG_BODY {
                    // A body header cannot be trusted for its length.
                    break;
                }
                out.damaged += 1;
            } else if h.tag == TAG_OBJECT && h.state == LIVE {
                let found = format::peek_record(payload).and_then(|p| {
                    let oldest = self.runs_hold(i, &p.runs)?;
                    Some(Found {
                        at,
                        inserted: p.inserted,
                        expires: p.expires,
                        oldest,
                        tagged: crate::tags::names_tags(p.head),
                    })
                });
                match found {
                    Some(f) => {
                        oldest_insert = oldest_insert.min(f.inserted);
                        out.objects.push(f);
                    }
                    None => out.damaged += 1,
                }
            } else if h.tag == TAG_RENDITION {
                if let Some(r) = format::decode_rendition(payload) {
                    out.renditions.push((r.obj_at, at));
                }
            } else if h.tag == TAG_BAN {
                if let Some(ban) = format::decode_ban(payload) {
                    self.segments[i]
                        .bans
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(ban.clone());
                    out.bans.push(ban);
                }
            }
            at = next;
        }
        let mut oldest = self.segments[i]
            .oldest
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *oldest = oldest.min(oldest_insert);
        at
    }

    /// Whether a body's runs are each inside a segment still written
    /// under the number the record gives; if so, the segment written
    /// first of those and the record's own (`record`).
    fn runs_hold(&self, record: usize, runs: &[(u64, u64, u32)]) -> Option<u32> {
        let seq_of = |i: usize| self.segments[i].seq.load(Ordering::Relaxed);
        let mut oldest = record;
        for &(at, run, seq) in runs {
            if at < SUPERBLOCK_LEN || run == 0 {
                return None;
            }
            let i = self.segment_of(at);
            self.segments.get(i)?;
            let seg_end = self.segment_start(i) + self.segment_len;
            if at.checked_add(run).is_none_or(|e| e > seg_end)
                || format::short_seq(seq_of(i)) != seq
            {
                return None;
            }
            if seq_of(i) < seq_of(oldest) {
                oldest = i;
            }
        }
        Some(oldest as u32)
    }

    /// Whether a record's body is still where it says, unchanged: each
    /// run inside a segment still written under the same number, and the
    /// checksum over them all.
    pub(super) fn body_holds(&self, r: &Record) -> bool {
        let mut sum = crc32fast::Hasher::new();
        let mut len = 0;
        for &(at, run, seq) in &r.extents {
            if at < SUPERBLOCK_LEN || run == 0 {
                return false;
            }
            if seq == format::INLINE {
                // Inside the record, which its checksum covered.
                sum.update(self.space.bytes(at, run));
                len += run;
                continue;
            }
            let i = self.segment_of(at);
            let seg_end = match self.segments.get(i) {
                Some(_) => self.segment_start(i) + self.segment_len,
                None => return false,
            };
            if at.checked_add(run).is_none_or(|e| e > seg_end)
                || u64::from(format::short_seq(
                    self.segments[i].seq.load(Ordering::Relaxed),
                )) != seq
            {
                return false;
            }
            sum.update(self.space.bytes(at, run));
            len += run;
        }
        len == r.body_len && sum.finalize() == r.body_sum
    }
}
