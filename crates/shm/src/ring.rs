//! The log ring: a file `_.vsl` in the work directory, mapped by the
//! daemon for writing and by tools for reading.
//!
//! Layout: a 256-byte header, then `vsl_space` bytes of ring. Positions
//! are logical byte counts since the ring was created; a position's byte
//! lives at `position % space`. The header holds:
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `LQVSL001` |
//! | 8 | ring size in bytes |
//! | 16 | `head`: end of the last complete batch |
//! | 24 | `reserve`: end of the batch being written (≥ head) |
//! | 32 | epoch: differs for every daemon start |
//! | 48 | 16 segment marks: the first batch start in each sixteenth |
//!
//! One writer at a time (a mutex in the daemon) sets `reserve`, copies a
//! batch of whole records, then sets `head`. A reader copies what lies
//! between its position and `head`, then checks `reserve`: if the writer
//! has since reached into what it copied, the copy may be torn and the
//! reader is told it was overrun instead of being given records.

use crate::record::{decode_into, Record};
use lacquer_core::counters::{Counter, COUNTERS};
use memmap2::{Mmap, MmapMut};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

const MAGIC: &[u8; 8] = b"LQVSL001";
const HEADER_LEN: usize = 256;
const SEGMENTS: u64 = 16;
const NO_MARK: u64 = u64::MAX;
/// Most bytes a reader copies out of the ring at one time.
const CHUNK: u64 = 4 << 20;

/// The ring file's name in the work directory.
pub const FILE_NAME: &str = "_.vsl";

fn path(workdir: &Path) -> PathBuf {
    workdir.join(FILE_NAME)
}

/// The header's atomic fields, wherever the header is mapped.
struct Header<'a> {
    head: &'a AtomicU64,
    reserve: &'a AtomicU64,
    marks: &'a [AtomicU64],
}

/// Views the header of a mapping at `base` (page aligned, at least
/// `HEADER_LEN` bytes long).
fn header<'a>(base: *const u8) -> Header<'a> {
    // SAFETY: the mapping is page aligned and outlives the returned
    // references (they are only used while the owning `Log`/`Reader`
    // lives); every field is 8-byte aligned within it; and atomics are the
    // right type for memory that another process changes.
    unsafe {
        Header {
            head: &*(base.add(16) as *const AtomicU64),
            reserve: &*(base.add(24) as *const AtomicU64),
            marks: std::slice::from_raw_parts(base.add(48) as *const AtomicU64, SEGMENTS as usize),
        }
    }
}

/// Where the daemon writes its log.
pub struct Log {
    map: MmapMut,
    space: u64,
    state: Mutex<WriterState>,
    /// Records go to the ring at once, not into a thread's batch: set
    /// when the process is about to end (see [`Log::write_through`]).
    through: AtomicBool,
}

struct WriterState {
    head: u64,
}

impl Log {
    /// Keeps the ring for the rest of the process, as transactions borrow
    /// it (a daemon makes one and never lets it go).
    pub fn leak(self) -> &'static Log {
        Box::leak(Box::new(self))
    }

    /// Creates a fresh ring of `space` bytes in `workdir`, replacing any
    /// earlier one (readers of the old one notice by its epoch).
    pub fn create(workdir: &Path, space: u64) -> io::Result<Log> {
        let tmp = workdir.join("_.vsl.new");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        // The ring's blocks are set aside now: a sparse ring on a full
        // disk would fail a write of the log (a fault, not an error) the
        // first time its pass reaches a block that is not there.
        crate::mapped::preallocate(&file, HEADER_LEN as u64 + space)?;
        // SAFETY: the file is ours, just created; other processes only
        // ever read it, through atomics and copies that they validate.
        let mut map = unsafe { MmapMut::map_mut(&file)? };
        // Its pages are faulted in, writable, now rather than on the
        // request path: a work directory on disk made the ring's first
        // pass wait on the filesystem, some page faults for milliseconds
        // (a p99 of 10 ms in a benchmark's first seconds). Kernels before
        // 5.14 cannot, and fault them in as the ring is written.
        let _ = map.advise(memmap2::Advice::PopulateWrite);
        let epoch = epoch();
        map[0..8].copy_from_slice(MAGIC);
        map[8..16].copy_from_slice(&space.to_le_bytes());
        map[32..40].copy_from_slice(&epoch.to_le_bytes());
        let h = header(map.as_ptr());
        h.head.store(0, Ordering::Relaxed);
        h.reserve.store(0, Ordering::Relaxed);
        for m in h.marks {
            m.store(NO_MARK, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        fs::rename(&tmp, path(workdir))?;
        Ok(Log {
            map,
            space,
            state: Mutex::new(WriterState { head: 0 }),
            through: AtomicBool::new(false),
        })
    }

    /// From now on every thread writes its records to the ring at once,
    /// what it gathered in its batch first, with its next records: the
    /// process is about to end, and records in a batch would be lost.
    pub fn write_through(&self) {
        self.through.store(true, Ordering::Relaxed);
    }

    /// Whether [`Log::write_through`] was asked.
    #[inline]
    pub(crate) fn writes_through(&self) -> bool {
        self.through.load(Ordering::Relaxed)
    }

    /// The most bytes a batch gathered for this ring should hold: `want`,
    /// or less for a small ring (a batch longer than a quarter of the
    /// ring is not written).
    pub(crate) fn batch_limit(&self, want: usize) -> usize {
        want.min((self.space / 8) as usize)
    }

    /// Appends a batch of whole records.
    pub fn write(&self, batch: &[u8]) {
        let len = batch.len() as u64;
        if len == 0 || len > self.space / 4 {
            return;
        }
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                COUNTERS.inc(Counter::shm_cont);
                self.state.lock().unwrap_or_else(|e| e.into_inner())
            }
        };
        COUNTERS.inc(Counter::shm_writes);
        COUNTERS.add(Counter::shm_bytes, len);
        let base = self.map.as_ptr() as *mut u8;
        let h = header(base);
        let start = st.head;
        let end = start + len;
        if start / self.space != end / self.space {
            COUNTERS.inc(Counter::shm_cycles);
        }
        h.reserve.store(end, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // The first batch starting in each sixteenth of the ring marks
        // where a reader asking for the oldest records may begin.
        let seg = (self.space / SEGMENTS).max(1);
        let segment = (start / seg) % SEGMENTS;
        let mark = &h.marks[segment as usize];
        let old = mark.load(Ordering::Relaxed);
        if old == NO_MARK || old / seg != start / seg {
            mark.store(start, Ordering::Release);
        }
        let offset = (start % self.space) as usize;
        let first = batch.len().min(self.space as usize - offset);
        // SAFETY: both ranges lie inside the ring part of the mapping
        // (`offset + first <= space`, the rest wraps to the start), and the
        // mutex makes this the only writer.
        unsafe {
            let ring = base.add(HEADER_LEN);
            copy_streaming(batch.as_ptr(), ring.add(offset), first);
            if first < batch.len() {
                copy_streaming(batch.as_ptr().add(first), ring, batch.len() - first);
            }
        }
        h.head.store(end, Ordering::Release);
        st.head = end;
    }
}

/// Copies `len` bytes to the ring with stores that bypass the caches.
/// The ring is far larger than the caches and nothing in the daemon reads
/// it back: ordinary stores would read each of its lines in and push out
/// what the next requests need (a cached body, a response head), which
/// then costs the kernel's copy to the socket. Measured with
/// `bench/ab.sh`, a keep-alive hit takes about 3% less CPU so.
///
/// # Safety
/// Both ranges are valid for `len` bytes and do not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let lead = dst.align_offset(16).min(len);
    std::ptr::copy_nonoverlapping(src, dst, lead);
    let mut i = lead;
    while i + 16 <= len {
        let v = _mm_loadu_si128(src.add(i) as *const __m128i);
        _mm_stream_si128(dst.add(i) as *mut __m128i, v);
        i += 16;
    }
    std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    _mm_sfence();
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    std::ptr::copy_nonoverlapping(src, dst, len);
}

fn epoch() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 40)
}

/// Why a ring could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// No daemon has made a log in that work directory.
    Missing(PathBuf),
    /// The file is not a log ring.
    Corrupt(PathBuf),
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Missing(p) => write!(
                f,
                "no log at {} (is a lacquer daemon running with this -n?)",
                p.display()
            ),
            OpenError::Corrupt(p) => write!(f, "{} is not a lacquer log", p.display()),
            OpenError::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for OpenError {}

/// The reader lost records: the writer went past them before they were
/// read, or the daemon started a new log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    Overrun,
    Restarted,
}

/// A tool's view of the ring.
pub struct Reader {
    map: Mmap,
    file: PathBuf,
    space: u64,
    epoch: u64,
    pos: u64,
}

impl Reader {
    /// Opens the ring of the daemon in `workdir`, positioned at its newest
    /// record (`tail`) or at its oldest (`-d`).
    pub fn open(workdir: &Path, from_oldest: bool) -> Result<Reader, OpenError> {
        let file = path(workdir);
        let f = match File::open(&file) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(OpenError::Missing(file));
            }
            Err(e) => return Err(OpenError::Io(file, e)),
        };
        // SAFETY: the mapping is read only; everything read through it is
        // copied out and validated against the writer's positions.
        let map = unsafe { Mmap::map(&f) }.map_err(|e| OpenError::Io(file.clone(), e))?;
        if map.len() < HEADER_LEN || &map[0..8] != MAGIC {
            return Err(OpenError::Corrupt(file));
        }
        let space = u64::from_le_bytes(map[8..16].try_into().expect("8 bytes"));
        let epoch = u64::from_le_bytes(map[32..40].try_into().expect("8 bytes"));
        if space == 0 || map.len() as u64 != HEADER_LEN as u64 + space {
            return Err(OpenError::Corrupt(file));
        }
        let mut r = Reader {
            map,
            file,
            space,
            epoch,
            pos: 0,
        };
        r.pos = if from_oldest { r.oldest() } else { r.head() };
        Ok(r)
    }

    fn head(&self) -> u64 {
        header(self.map.as_ptr()).head.load(Ordering::Acquire)
    }

    /// How many bytes the writer is ahead of this reader.
    pub fn behind(&self) -> u64 {
        self.head().saturating_sub(self.pos)
    }

    /// The earliest batch start still in the ring.
    fn oldest(&self) -> u64 {
        let h = header(self.map.as_ptr());
        let reserve = h.reserve.load(Ordering::Acquire);
        let floor = reserve.saturating_sub(self.space);
        let head = self.head();
        h.marks
            .iter()
            .map(|m| m.load(Ordering::Acquire))
            .filter(|&m| m != NO_MARK && m >= floor && m <= head)
            .min()
            .unwrap_or(head)
    }

    /// Whether the daemon has since replaced this ring with a new one.
    pub fn replaced(&self) -> bool {
        let Ok(mut f) = File::open(&self.file) else {
            return false;
        };
        let mut head = [0u8; 40];
        use std::io::Read;
        if f.read_exact(&mut head).is_err() || &head[0..8] != MAGIC {
            return false;
        }
        u64::from_le_bytes(head[32..40].try_into().expect("8 bytes")) != self.epoch
    }

    /// Reopens a replaced ring at its oldest record.
    pub fn reopen(&mut self) -> Result<(), OpenError> {
        let dir = self
            .file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        *self = Reader::open(&dir, true)?;
        Ok(())
    }

    /// Appends the records written since the last call to `out`. On
    /// `Err`, nothing is appended and the reader has skipped to the
    /// newest record.
    pub fn poll(&mut self, out: &mut Vec<Record>) -> Result<usize, Lost> {
        let head = self.head();
        if head < self.pos {
            // A new log in the same file cannot happen (it is replaced by
            // rename), but be safe: start over at its head.
            self.pos = head;
            return Err(Lost::Restarted);
        }
        if head == self.pos {
            return Ok(0);
        }
        if head - self.pos > self.space {
            self.pos = head;
            return Err(Lost::Overrun);
        }
        let len = (head - self.pos).min(CHUNK);
        // A chunk of its own each time: the records handed out are slices
        // of it, and it is freed when the last of them is.
        let mut chunk: Vec<u8> = Vec::with_capacity(len as usize);
        let offset = (self.pos % self.space) as usize;
        let first = (len as usize).min(self.space as usize - offset);
        // SAFETY: both source ranges lie inside the ring part of the
        // mapping and the destination has room for `len` bytes, all of
        // which are written before the length is set; the bytes may be
        // changing under us, which is why they are only trusted after the
        // check below.
        unsafe {
            let ring = self.map.as_ptr().add(HEADER_LEN);
            std::ptr::copy_nonoverlapping(ring.add(offset), chunk.as_mut_ptr(), first);
            if first < len as usize {
                std::ptr::copy_nonoverlapping(
                    ring,
                    chunk.as_mut_ptr().add(first),
                    len as usize - first,
                );
            }
            chunk.set_len(len as usize);
        }
        let chunk = bytes::Bytes::from(chunk);
        fence(Ordering::SeqCst);
        let reserve = header(self.map.as_ptr()).reserve.load(Ordering::SeqCst);
        if reserve > self.pos + self.space {
            self.pos = self.head();
            return Err(Lost::Overrun);
        }
        let mut used = 0;
        let before = out.len();
        loop {
            match decode_into(&chunk, used, out) {
                Ok(Some(n)) => used += n,
                Ok(None) => break,
                Err(_) => {
                    out.truncate(before);
                    self.pos = self.head();
                    return Err(Lost::Overrun);
                }
            }
        }
        if used == 0 && len == head - self.pos {
            // A committed range always holds whole records.
            self.pos = head;
            return Err(Lost::Overrun);
        }
        self.pos += used as u64;
        Ok(out.len() - before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Limits, Side, Txn};
    use crate::tags::Tag;

    fn limits() -> Limits {
        Limits {
            reclen: 255,
            buffer: 64,
            mask: 0,
        }
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lacquer-ring-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn streaming_copy_is_exact_at_every_alignment() {
        let src: Vec<u8> = (0..200u8).collect();
        for from in 0..17 {
            for to in 0..17 {
                for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 150] {
                    let mut dst = [0xaau8; 200];
                    // SAFETY: both ranges lie inside their buffers.
                    unsafe { copy_streaming(src[from..].as_ptr(), dst[to..].as_mut_ptr(), len) };
                    assert_eq!(
                        &dst[to..to + len],
                        &src[from..from + len],
                        "{from} {to} {len}"
                    );
                    assert!(dst[..to].iter().all(|&b| b == 0xaa));
                    assert!(dst[to + len..].iter().all(|&b| b == 0xaa));
                }
            }
        }
    }

    #[test]
    fn missing_log_is_named() {
        let dir = tempdir("missing");
        match Reader::open(&dir, false) {
            Err(OpenError::Missing(p)) => assert!(p.ends_with(FILE_NAME)),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("opened a log that does not exist"),
        }
    }

    #[test]
    fn writes_are_read_in_order() {
        let dir = tempdir("order");
        let log = Log::create(&dir, 1 << 16).unwrap().leak();
        let mut early = Reader::open(&dir, false).unwrap();
        let mut t = Txn::new(Some(log), 7, Side::Client, limits());
        t.begin(&crate::record::txn::REQ, 6, &crate::record::txn::RXREQ, 1.0);
        t.bytes(Tag::ReqURL, b"/a");
        t.end();
        let mut got = Vec::new();
        early.poll(&mut got).unwrap();
        let tags: Vec<Tag> = got.iter().map(|r| r.tag).collect();
        assert_eq!(tags, vec![Tag::Begin, Tag::ReqURL, Tag::End]);
        assert_eq!(&got[0].payload[..], b"req 6 rxreq");
        // A reader started later sees nothing old, unless it asks for it.
        let mut late = Reader::open(&dir, false).unwrap();
        got.clear();
        assert_eq!(late.poll(&mut got), Ok(0));
        let mut oldest = Reader::open(&dir, true).unwrap();
        assert_eq!(oldest.poll(&mut got), Ok(3));
    }

    #[test]
    fn wrapping_never_yields_torn_records() {
        let dir = tempdir("wrap");
        let space = 4096;
        let log = Log::create(&dir, space).unwrap().leak();
        let mut reader = Reader::open(&dir, false).unwrap();
        let mut lost = 0;
        let mut seen = 0u64;
        for round in 0..2000u64 {
            let mut t = Txn::new(Some(log), round, Side::Backend, limits());
            let payload = format!("payload-{round}-{}", "x".repeat((round % 50) as usize));
            t.bytes(Tag::Debug, payload.as_bytes());
            t.end();
            let every = if round < 1000 { 37 } else { 150 };
            if round % every == 0 {
                let mut got = Vec::new();
                match reader.poll(&mut got) {
                    Ok(_) => {
                        for r in &got {
                            if r.tag == Tag::Debug {
                                let text = r.text();
                                assert!(text.starts_with(&format!("payload-{}-", r.vxid)));
                                seen += 1;
                            }
                        }
                    }
                    Err(Lost::Overrun) => lost += 1,
                    Err(e) => panic!("{e:?}"),
                }
            }
        }
        assert!(lost > 0, "a slow reader of a small ring must be overrun");
        assert!(seen > 0);
        // The oldest records still in the ring are whole.
        let mut oldest = Reader::open(&dir, true).unwrap();
        let mut got = Vec::new();
        oldest.poll(&mut got).unwrap();
        assert!(!got.is_empty());
        assert!(got.iter().all(|r| r.tag == Tag::Debug || r.tag == Tag::End));
    }

    #[test]
    fn concurrent_writer_and_reader() {
        let dir = tempdir("concurrent");
        let log = Log::create(&dir, 1 << 14).unwrap().leak();
        let writer = {
            std::thread::spawn(move || {
                for i in 0..20000u64 {
                    let mut t = Txn::new(Some(log), i, Side::Client, limits());
                    t.bytes(
                        Tag::ReqURL,
                        format!("/{i}/{}", "y".repeat((i % 90) as usize)).as_bytes(),
                    );
                    t.end();
                }
            })
        };
        let mut reader = Reader::open(&dir, false).unwrap();
        let mut got = Vec::new();
        while !writer.is_finished() {
            got.clear();
            if reader.poll(&mut got).is_ok() {
                for r in &got {
                    if r.tag == Tag::ReqURL {
                        assert!(r.text().starts_with(&format!("/{}/", r.vxid)));
                    }
                }
            }
        }
        writer.join().unwrap();
    }

    /// The ring's space is on the disk from the start, not a sparse file
    /// to be filled in as records come.
    #[test]
    fn the_ring_is_not_sparse() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempdir("allocated");
        let space = 1u64 << 20;
        let _log = Log::create(&dir, space).unwrap();
        let meta = fs::metadata(path(&dir)).unwrap();
        assert!(meta.blocks() * 512 >= space, "{} blocks", meta.blocks());
    }

    #[test]
    fn a_new_log_is_noticed() {
        let dir = tempdir("replace");
        let _first = Log::create(&dir, 1 << 12).unwrap();
        let reader = Reader::open(&dir, false).unwrap();
        assert!(!reader.replaced());
        let _second = Log::create(&dir, 1 << 12).unwrap();
        assert!(reader.replaced());
    }
}
