//! A body: shared byte chunks that grow while a fetch streams them in,
//! read by many clients at once, each from where it is; and the reader
//! of a byte range of it. Chunks are the views a store's engine gave
//! for the bytes it placed.

use arc_swap::ArcSwapOption;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Notify;

/// The largest body a fetch copies into allocations of its own size as
/// it comes (see [`Body::copy_small`]), for a store that keeps it on the
/// heap: past it, the body is kept in the pieces it was read in (an
/// announced length is not trusted with memory before the bytes come).
pub const SMALL_MAX: u64 = 8 * 1024;

/// Why reading a body stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFailed;

#[derive(Debug)]
struct BodyState {
    chunks: Vec<Bytes>,
    len: u64,
    failed: bool,
    complete: bool,
    /// The chunks, and their bytes, that the furthest reader is done
    /// with (it asked for the ones after them).
    taken_chunks: usize,
    taken: u64,
    /// The body is small and on the heap: its bytes are copied out of
    /// the buffers they came in, so that it holds no more than itself
    /// (see [`Body::copy_small`]).
    small: bool,
    /// Room for a small body that comes in several pieces: they are
    /// copied into it while they fit, so that the body is one allocation.
    spare: Option<BytesMut>,
    /// A small body that came in one piece, copied into an allocation of
    /// its own size that nothing else shares: once complete, the body is
    /// this (readers meanwhile read the piece as it came). Never shared,
    /// it needs no reference-counted header.
    whole: Option<Box<[u8]>>,
}

/// A body that may still be arriving. Once complete it is its chunks
/// alone: the fill's state (lock, wake-ups, read-ahead accounting) lives
/// apart and is let go when the fill ends, so a stored object does not
/// carry it.
#[derive(Debug)]
pub struct Body {
    /// The whole body, once complete.
    done: OnceLock<Chunks>,
    /// The fill's state while the body streams in (None once complete):
    /// one word, read without a lock (a `Mutex` around the `Option` took
    /// two in every object).
    filling: ArcSwapOption<Filling>,
}

/// A complete body as it is kept: 24 bytes in every object.
#[derive(Debug)]
enum Chunks {
    /// A small body copied off the buffers it came in (see
    /// [`Body::copy_small`]): one allocation of its size, which nothing
    /// shares; a reader that needs `Bytes` gets a copy.
    Small(Box<[u8]>),
    /// Views of the buffers, or of the store's space, the bytes were
    /// placed in.
    Many(Box<[Bytes]>),
}

/// A complete body, read.
#[derive(Debug, Clone, Copy)]
pub enum Whole<'a> {
    /// A small body in one piece.
    Small(&'a [u8]),
    Chunks(&'a [Bytes]),
}

impl<'a> Whole<'a> {
    pub fn len(self) -> u64 {
        match self {
            Whole::Small(s) => s.len() as u64,
            Whole::Chunks(c) => c.iter().map(|c| c.len() as u64).sum(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Its pieces, in order.
    pub fn pieces(self) -> impl Iterator<Item = &'a [u8]> {
        let (small, chunks) = match self {
            Whole::Small(s) => (Some(s), &[][..]),
            Whole::Chunks(c) => (None, c),
        };
        small.into_iter().chain(chunks.iter().map(|c| &c[..]))
    }

    /// Its pieces as `Bytes`: the chunks shared, a small body copied.
    pub fn to_chunks(self) -> Vec<Bytes> {
        match self {
            Whole::Small(s) => vec![Bytes::copy_from_slice(s)],
            Whole::Chunks(c) => c.to_vec(),
        }
    }

    /// All of it, in one buffer (a copy).
    pub fn to_vec(self) -> Vec<u8> {
        self.pieces().collect::<Vec<_>>().concat()
    }
}

impl Chunks {
    fn whole(&self) -> Whole<'_> {
        match self {
            Chunks::Small(s) => Whole::Small(s),
            Chunks::Many(many) => Whole::Chunks(many),
        }
    }
}

/// What readers and the fill share while a body streams in.
#[derive(Debug)]
struct Filling {
    state: Mutex<BodyState>,
    notify: Notify,
    /// Wakes a fill waiting for readers to catch up.
    taken: Notify,
    /// Chunks its reader is done with are dropped (an object only one
    /// request will ever read: a pass, a hit-for-miss), so that memory
    /// follows the read-ahead, not the body's size.
    release_behind: AtomicBool,
    /// The reader needs the whole body: nothing is let go, whichever of
    /// this and `release_behind` is said first.
    keep_whole: AtomicBool,
    /// The length announced before streaming (a backend Content-Length).
    expected_len: Option<u64>,
}

impl Filling {
    fn lock(&self) -> std::sync::MutexGuard<'_, BodyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Body {
    /// An empty body that will be filled by a fetch.
    pub fn streaming(expected_len: Option<u64>) -> Self {
        let filling = Filling {
            state: Mutex::new(BodyState {
                chunks: Vec::new(),
                len: 0,
                failed: false,
                complete: false,
                taken_chunks: 0,
                taken: 0,
                small: false,
                spare: None,
                whole: None,
            }),
            notify: Notify::new(),
            taken: Notify::new(),
            release_behind: AtomicBool::new(false),
            keep_whole: AtomicBool::new(false),
            expected_len,
        };
        Body {
            done: OnceLock::new(),
            filling: ArcSwapOption::from_pointee(filling),
        }
    }

    /// A body that is complete from the start, kept as the chunks given.
    pub fn complete(chunks: Vec<Bytes>) -> Self {
        Body::done(Chunks::Many(chunks.into_boxed_slice()))
    }

    /// A body that is complete from the start, copied into one allocation
    /// of its size (a small body kept on the heap).
    pub fn complete_small(bytes: &[u8]) -> Self {
        Body::done(Chunks::Small(Box::from(bytes)))
    }

    fn done(chunks: Chunks) -> Self {
        let done = OnceLock::new();
        let _ = done.set(chunks);
        Body {
            done,
            filling: ArcSwapOption::empty(),
        }
    }

    /// The fill's state, while there is a fill.
    fn filling(&self) -> Option<Arc<Filling>> {
        self.filling.load_full()
    }

    /// Copies the bytes of a small body (its length announced) into
    /// allocations of their own as they come, rather than keeping views
    /// of the buffers they were read into: for bytes the store keeps on
    /// the heap only.
    pub fn copy_small(&self) {
        if let Some(f) = self.filling() {
            if f.expected_len.is_some() {
                f.lock().small = true;
            }
        }
    }

    /// Appends bytes; wakes every reader.
    pub fn push(&self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        let Some(f) = self.filling() else { return };
        let mut st = f.lock();
        if st.complete {
            return;
        }
        st.len += chunk.len() as u64;
        let expected = f.expected_len.unwrap_or(0);
        // A body its one reader lets go of as it reads (a pass) is kept
        // by nobody: no copy.
        let let_go =
            f.release_behind.load(Ordering::Relaxed) && !f.keep_whole.load(Ordering::Relaxed);
        let chunk = if !st.small || let_go {
            chunk
        } else if st.chunks.is_empty() && st.len == expected {
            // All of it at once (most small bodies): an exact copy for
            // the object, and the piece as it came for readers meanwhile.
            st.whole = Some(Box::from(&chunk[..]));
            chunk
        } else {
            let spare = st
                .spare
                .get_or_insert_with(|| BytesMut::with_capacity(expected as usize));
            if spare.capacity() - spare.len() >= chunk.len() {
                spare.extend_from_slice(&chunk);
                spare.split().freeze()
            } else {
                // What does not fit is copied on its own (the fetch hands
                // a small body views of its read buffer, which the object
                // must not keep), and so is all that follows: the room is
                // let go for one that fits nothing.
                st.spare = Some(BytesMut::new());
                Bytes::copy_from_slice(&chunk)
            }
        };
        st.chunks.push(chunk);
        drop(st);
        f.notify.notify_waiters();
    }

    /// Marks the body complete, and lets the fill's state go.
    pub fn finish(&self) {
        let Some(f) = self.filling() else { return };
        let mut st = f.lock();
        st.complete = true;
        st.spare = None;
        let whole = st.whole.take();
        let chunks = std::mem::take(&mut st.chunks);
        let done = match whole {
            // Unless a reader let the piece go (a body read once).
            Some(whole) if chunks.len() == 1 && chunks[0].len() == whole.len() => {
                Chunks::Small(whole)
            }
            _ => Chunks::Many(chunks.into_boxed_slice()),
        };
        let _ = self.done.set(done);
        drop(st);
        // Readers that wait hold the state themselves; they wake, see the
        // body done and let go of it too.
        self.filling.store(None);
        f.notify.notify_waiters();
        f.taken.notify_waiters();
    }

    /// Marks the body failed: readers stop with an error.
    pub fn fail(&self) {
        let Some(f) = self.filling() else { return };
        let mut st = f.lock();
        if st.complete {
            return;
        }
        st.failed = true;
        drop(st);
        f.notify.notify_waiters();
        f.taken.notify_waiters();
    }

    /// The whole body, once complete.
    #[inline]
    pub fn whole(&self) -> Option<Whole<'_>> {
        self.done.get().map(Chunks::whole)
    }

    /// Whether the body is complete.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.done.get().is_some()
    }

    /// The final length if known: complete, or announced.
    pub fn known_len(&self) -> Option<u64> {
        match self.whole() {
            Some(whole) => Some(whole.len()),
            None => self.filling().and_then(|f| f.expected_len),
        }
    }

    /// Whether the fetch filling this body failed.
    pub fn is_failed(&self) -> bool {
        // A complete body never failed: no lock on a hit.
        self.done.get().is_none() && self.filling().is_some_and(|f| f.lock().failed)
    }

    /// Drops, from now on, the chunks a reader is done with: for a body
    /// that exactly one reader will read, once, from the start.
    pub fn release_behind_reader(&self) {
        if let Some(f) = self.filling() {
            f.release_behind.store(true, Ordering::Relaxed);
        }
    }

    /// Keeps every chunk after all: the reader needs the whole body at
    /// once (an ESI page, a gzip'd include spliced into its page).
    pub fn keep_whole(&self) {
        if let Some(f) = self.filling() {
            f.keep_whole.store(true, Ordering::Relaxed);
        }
    }

    /// Waits until the furthest reader is no more than `ahead` bytes
    /// behind what has been pushed, or `patience` has passed (so that the
    /// caller can see whether anyone still reads). True when there is
    /// room.
    pub async fn wait_taken(&self, ahead: u64, patience: std::time::Duration) -> bool {
        let Some(f) = self.filling() else {
            return true;
        };
        let room = async {
            loop {
                let notified = f.taken.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let st = f.lock();
                    if st.len - st.taken <= ahead || st.failed || st.complete {
                        return;
                    }
                }
                notified.await;
            }
        };
        tokio::time::timeout(patience, room).await.is_ok()
    }

    /// Waits for chunks from index `from` on. Returns the new chunks (empty
    /// with `Ok(true)` at the end of the body).
    pub async fn wait_chunks(&self, from: usize, out: &mut Vec<Bytes>) -> Result<bool, BodyFailed> {
        // A small body is one chunk, copied for the reader: a shared
        // view would give the object a reference-counted header for good.
        let done = |out: &mut Vec<Bytes>| {
            match self.done.get()? {
                Chunks::Small(s) if from == 0 => out.push(Bytes::copy_from_slice(s)),
                Chunks::Small(_) => {}
                Chunks::Many(done) if from < done.len() => out.extend_from_slice(&done[from..]),
                Chunks::Many(_) => {}
            }
            Some(Ok(true))
        };
        if let Some(end) = done(out) {
            return end;
        }
        let Some(f) = self.filling() else {
            // Finished between the two looks.
            return done(out).unwrap_or(Err(BodyFailed));
        };
        loop {
            let notified = f.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(end) = done(out) {
                return end;
            }
            {
                let mut st = f.lock();
                if st.failed {
                    return Err(BodyFailed);
                }
                if from > st.taken_chunks && from <= st.chunks.len() {
                    let behind = st.taken_chunks..from;
                    let taken: u64 = st.chunks[behind.clone()]
                        .iter()
                        .map(|c| c.len() as u64)
                        .sum();
                    if f.release_behind.load(Ordering::Relaxed)
                        && !f.keep_whole.load(Ordering::Relaxed)
                    {
                        st.chunks[behind].fill(Bytes::new());
                    }
                    st.taken += taken;
                    st.taken_chunks = from;
                    f.taken.notify_waiters();
                }
                if st.complete {
                    continue;
                }
                if from < st.chunks.len() {
                    out.extend_from_slice(&st.chunks[from..]);
                    return Ok(false);
                }
            }
            notified.await;
        }
    }
}

/// Reads the bytes `skip..skip + take` of a body as they arrive: each
/// call gives the next slices of that range, zero-copy views of the
/// stored chunks.
#[derive(Debug)]
pub struct RangeReader<'b> {
    body: &'b Body,
    next: usize,
    skip: u64,
    take: u64,
    pieces: Vec<Bytes>,
}

impl Body {
    /// A reader of `take` bytes after the first `skip` (`u64::MAX` for
    /// all of the rest).
    pub fn range(&self, skip: u64, take: u64) -> RangeReader<'_> {
        RangeReader {
            body: self,
            next: 0,
            skip,
            take,
            pieces: Vec::new(),
        }
    }
}

impl RangeReader<'_> {
    /// Appends to `out` the next slices of the range, waiting for the
    /// fetch when it has none yet; true once the range is complete (the
    /// body ended, or the range did).
    pub async fn next(&mut self, out: &mut Vec<Bytes>) -> Result<bool, BodyFailed> {
        self.pieces.clear();
        let end = self.body.wait_chunks(self.next, &mut self.pieces).await?;
        self.next += self.pieces.len();
        for piece in self.pieces.drain(..) {
            let len = piece.len() as u64;
            if self.skip >= len {
                self.skip -= len;
                continue;
            }
            let from = self.skip as usize;
            self.skip = 0;
            let n = (len - from as u64).min(self.take) as usize;
            if n == 0 {
                break;
            }
            self.take -= n as u64;
            out.push(piece.slice(from..from + n));
        }
        Ok(end || self.take == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_body_reaches_readers() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(streaming_body_reaches_readers_async());
    }

    async fn streaming_body_reaches_readers_async() {
        let body = Arc::new(Body::streaming(None));
        let reader = {
            let body = body.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut n = 0;
                loop {
                    let mut out = Vec::new();
                    let end = body.wait_chunks(n, &mut out).await.unwrap();
                    n += out.len();
                    got.extend(out);
                    if end {
                        return got;
                    }
                }
            })
        };
        body.push(Bytes::from_static(b"a"));
        tokio::task::yield_now().await;
        body.push(Bytes::from_static(b"b"));
        body.finish();
        let got = reader.await.unwrap();
        assert_eq!(got.concat(), b"ab");
        assert_eq!(body.known_len(), Some(2));
    }

    #[test]
    fn a_reader_lets_go_of_what_it_took_unless_it_keeps_the_whole() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for keep in [false, true] {
                let body = Body::streaming(None);
                if keep {
                    // Said before the fill says to release: still kept.
                    body.keep_whole();
                }
                body.release_behind_reader();
                body.push(Bytes::from_static(b"one"));
                body.push(Bytes::from_static(b"two"));
                let mut out = Vec::new();
                assert!(!body.wait_chunks(0, &mut out).await.unwrap());
                assert_eq!(out.len(), 2);
                body.push(Bytes::from_static(b"three"));
                let mut rest = Vec::new();
                assert!(!body.wait_chunks(2, &mut rest).await.unwrap());
                assert_eq!(rest.concat(), b"three");
                body.finish();
                assert!(body.wait_chunks(3, &mut Vec::new()).await.unwrap());
                let kept: Vec<u8> = body.whole().unwrap().to_vec();
                if keep {
                    assert_eq!(kept, b"onetwothree");
                } else {
                    assert_eq!(kept, b"three", "what was taken is let go");
                }
            }
        });
    }

    #[test]
    fn a_small_body_is_copied_out_of_the_buffers_it_came_in() {
        // In one piece: readers meanwhile get the piece as it came; the
        // body, once complete, is a copy the size of the body.
        let body = Body::streaming(Some(3));
        body.copy_small();
        let read_buffer = Bytes::from_static(b"abc and more the read buffer held");
        body.push(read_buffer.slice(0..3));
        body.finish();
        let Some(Whole::Small(kept)) = body.whole() else {
            panic!("kept in one piece of its own");
        };
        assert_eq!(kept, b"abc");
        assert_ne!(kept.as_ptr(), read_buffer.as_ptr(), "a copy");
        // A reader of the complete body gets a copy, not a view: the kept
        // piece never gets a shared reference count.
        let mut read = Vec::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(body.wait_chunks(0, &mut read)).unwrap());
        assert_eq!(read, [&b"abc"[..]]);
        assert_ne!(read[0].as_ptr(), kept.as_ptr());
        assert!(rt.block_on(body.wait_chunks(1, &mut read)).unwrap());
        assert_eq!(read.len(), 1, "one chunk");
        // In several pieces: one allocation of the announced size, and what
        // does not fit, and all after it, copied on its own: a small body
        // keeps none of the pieces it was given.
        let body = Body::streaming(Some(5));
        body.copy_small();
        body.push(Bytes::from_static(b"abc"));
        body.push(Bytes::from_static(b"de"));
        body.push(Bytes::from_static(b"fgh"));
        body.push(Bytes::from_static(b"i"));
        body.finish();
        let Some(Whole::Chunks(chunks)) = body.whole() else {
            panic!("pieces")
        };
        assert_eq!(chunks.concat(), b"abcdefghi");
        let end_of = |b: &Bytes| b.as_ptr() as usize + b.len();
        assert_eq!(
            chunks[1].as_ptr() as usize,
            end_of(&chunks[0]),
            "one allocation"
        );
        assert_ne!(chunks[2].as_ptr(), b"fgh".as_ptr());
        assert_ne!(chunks[3].as_ptr(), b"i".as_ptr());
        assert_ne!(chunks[3].as_ptr() as usize, end_of(&chunks[1]));
        // Without an announced length nothing is copied.
        let body = Body::streaming(None);
        body.copy_small();
        body.push(Bytes::from_static(b"xyz"));
        body.finish();
        let Some(Whole::Chunks(chunks)) = body.whole() else {
            panic!("as it came")
        };
        assert_eq!(chunks[0].as_ptr(), b"xyz".as_ptr());
    }

    #[test]
    fn a_reader_that_let_the_piece_go_leaves_nothing_kept() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let body = Body::streaming(Some(3));
            body.copy_small();
            body.release_behind_reader();
            body.push(Bytes::from_static(b"abc"));
            assert!(
                body.filling().unwrap().lock().whole.is_none(),
                "no copy made"
            );
            let body = Arc::new(body);
            let mut out = Vec::new();
            assert!(!body.wait_chunks(0, &mut out).await.unwrap());
            // Asking for what follows lets the first piece go.
            let reader = {
                let body = body.clone();
                tokio::spawn(async move { body.wait_chunks(1, &mut Vec::new()).await })
            };
            tokio::task::yield_now().await;
            body.finish();
            assert!(reader.await.unwrap().unwrap());
            assert_eq!(
                body.whole().unwrap().to_vec(),
                b"",
                "let go, not kept whole"
            );
        });
    }

    #[test]
    fn a_range_reader_gives_slices_of_the_range_only() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let body = Body::streaming(None);
            body.push(Bytes::from_static(b"0123"));
            body.push(Bytes::from_static(b"4567"));
            let mut reader = body.range(2, 4);
            let mut out = Vec::new();
            assert!(
                reader.next(&mut out).await.unwrap(),
                "the range is complete"
            );
            assert_eq!(out.concat(), b"2345");
            let whole = Body::streaming(None);
            whole.push(Bytes::from_static(b"ab"));
            let mut reader = whole.range(0, u64::MAX);
            let mut out = Vec::new();
            assert!(!reader.next(&mut out).await.unwrap());
            whole.push(Bytes::from_static(b"cd"));
            whole.finish();
            assert!(reader.next(&mut out).await.unwrap());
            assert_eq!(out.concat(), b"abcd");
            let failed = Body::streaming(None);
            failed.fail();
            assert_eq!(failed.range(0, 1).next(&mut out).await, Err(BodyFailed));
        });
    }
}
