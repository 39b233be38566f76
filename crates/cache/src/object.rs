//! Stored objects: the serialised response head, the body as shared byte
//! chunks that grow while the fetch streams, and the timers (ttl, grace,
//! keep) that decide freshness. Many clients read one body while it is
//! still arriving.

use crate::ban::{BanPlace, BanRef};
pub use crate::body::{Body, BodyFailed};
use crate::packed;
pub use crate::packed::{Value as FieldValue, ValueBytes};
use crate::store::Store;
pub use crate::vary::{VarySpec, VaryStar};
use bytes::Bytes;
use lacquer_http::headers::name_eq;
use lacquer_http::Headers;
use once_cell::race::OnceBox;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

pub use crate::floats::{AtomicF32, AtomicF64};

mod head;
pub(crate) mod slots;

/// What an object is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ObjKind {
    /// A response that can be delivered.
    Normal = 0,
    /// A hit-for-miss marker: requests that find it fetch on their own.
    HitMiss = 1,
    /// A hit-for-pass marker: requests that find it are passed.
    HitPass = 2,
}

/// Where an object's kind sits in its `status_kind`, above the status.
const KIND_SHIFT: u32 = 14;
const STATUS_BITS: u16 = (1 << 10) - 1;

/// The freshness timers of an object, relative to `t_origin`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timers {
    /// When the response was generated (fetch time less its `Age`).
    pub t_origin: f64,
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
}

impl Timers {
    /// Total lifetime in the cache.
    pub fn lifetime(&self) -> f64 {
        self.ttl + self.grace.max(0.0) + self.keep.max(0.0)
    }

    /// Shortens the object's life so that it ends `at_most` seconds after
    /// `now` (its TTL first, then its grace, then its keep); a shorter
    /// life is left as it is.
    pub fn cap_life(&mut self, now: f64, at_most: f64) {
        let left = (now - self.t_origin).max(0.0) + at_most.max(0.0);
        self.ttl = self.ttl.min(left);
        self.grace = self.grace.min((left - self.ttl).max(0.0));
        self.keep = self.keep.min((left - self.ttl - self.grace).max(0.0));
    }
}

/// A key's digest: its 128-bit SipHash-1-3 under a secret key drawn for
/// each process (one pass over the key). Keys are told apart by their
/// digests alone, as Varnish tells them apart by SHA-256: nobody outside
/// sees the digest or knows the secret keys, so nobody can aim two keys at
/// one digest, and two keys of a billion objects share one by chance with a
/// probability near 10^-21.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest([u64; 2]);

impl Digest {
    pub(crate) fn from_halves(halves: [u64; 2]) -> Digest {
        Digest(halves)
    }

    pub(crate) fn halves(self) -> [u64; 2] {
        self.0
    }

    /// The half that picks the table and the bucket.
    #[inline]
    pub(crate) fn hash(self) -> u64 {
        self.0[0]
    }
}

/// What the daemon attaches to an object and the cache keeps without
/// reading it: a page's ESI program, what splicing needs of a gzip'd body.
pub type Attr = Arc<dyn std::any::Any + Send + Sync>;

/// One cached response (or a marker). What most objects never have
/// (a `Vary`, an ESI program, gzip bits, tags) lives in [`Extra`],
/// allocated when first needed, so that the common object is smaller.
#[derive(Debug)]
pub struct Object {
    /// The vxid of the fetch that made it (vxids stay below 2^30 and
    /// wrap, as Varnish's do: `lacquer_core::ids`).
    xid: u32,
    /// The status line and the stored headers, packed ([`crate::packed`]:
    /// the usual status line and well-known names a byte each, dates as
    /// seconds, values many objects share as numbers, other values after
    /// their lengths). The header list is read from it when asked for
    /// ([`Object::headers`], [`Object::header`]) rather than kept beside
    /// it: 64 bytes a field per object otherwise. In the object when
    /// small, else an allocation of its own size that nothing shares: a
    /// hit never clones it.
    head: packed::Kept,
    body: Body,
    t_origin: AtomicF64,
    ttl: AtomicF64,
    /// Grace and keep in single precision, rounded down (never more
    /// than was set): exact for whole seconds up to 194 days, within a
    /// second past that, and within a millionth of their length always.
    /// The 8 bytes they save keep a small head inline.
    grace: AtomicF32,
    keep: AtomicF32,
    pub(crate) hits: AtomicU32,
    /// The second (of the epoch, modulo 2^8) a request's `min-fresh`
    /// last made this object a miss. Inline, where it fills what would be
    /// padding: in the box of what few objects have, a client sending
    /// `min-fresh` could make every object it touches allocate one.
    min_fresh_miss: AtomicU8,
    /// The digest of the key it is indexed under, once inserted
    /// ([`INDEXED`] says when).
    digest: [AtomicU64; 2],
    /// The store charged for it, chosen before it is made (none: a pass,
    /// a synthetic response, a test's object).
    pub(crate) store: Option<Arc<Store>>,
    pub(crate) allocated: AtomicU64,
    /// The number of the newest ban the object is known to survive (0
    /// before it has a place in the ban list), readable without a lock.
    ban_seq: AtomicU64,
    ban: BanPlace,
    /// A pointer wide, set once (`OnceLock` would add a word).
    extra: OnceBox<Extra>,
    /// Its node on the LRU lists (`u32::MAX`: none).
    pub(crate) lru_slot: AtomicU32,
    /// The millisecond (of the epoch, modulo 2^32) it last moved on the
    /// LRU lists: only differences of less than 49 days are read.
    lru_stamp: AtomicU32,
    /// Its place in the expiry queue's heap ([`NOT_QUEUED`]: none),
    /// written under the queue's lock.
    exp_slot: AtomicU32,
    /// The status (below 1024), [`OTHER_CODING`], [`HEAD_LENGTH`] and, in the top two
    /// bits, the kind: one byte less, which is what keeps the object in
    /// 168 bytes.
    status_kind: u16,
    /// [`REMOVED`], [`INDEXED`], [`LRU_PROTECTED`], [`ESI_EXPECTED`],
    /// [`NO_RENDITION`], and what its head says once: [`ACCEPT_RANGES`],
    /// [`GZIPPED`].
    flags: AtomicU8,
}

/// It left the cache (or was replaced): lookups pass it by.
const REMOVED: u8 = 1;
/// It was put in the index: its digest is set.
const INDEXED: u8 = 2;
/// On the protected eviction list (asked for again since stored).
const LRU_PROTECTED: u8 = 4;
/// The fetch parses the body for ESI (`beresp.do_esi`).
const ESI_EXPECTED: u8 = 8;
/// The stored headers include `Accept-Ranges`.
const ACCEPT_RANGES: u8 = 16;
/// The stored body is gzip'd (`Content-Encoding: gzip`), read once
/// rather than on every delivery.
const GZIPPED: u8 = 32;
/// No rendition of it is to be made in any coding (its body, type or
/// status does not suit): found once, so later hits do not look again.
const NO_RENDITION: u8 = 64;
/// In `status_kind`: the stored body has a `Content-Encoding` other than
/// gzip (br, zstd, or one Lacquer does not know); delivery reads which.
const OTHER_CODING: u16 = 1 << 10;
/// In `status_kind`: the stored head has a `Content-Length` (the body's
/// length, as the origin announced it; or, for an object fetched with a
/// HEAD, the length that HEAD announced).
const HEAD_LENGTH: u16 = 1 << 11;
/// Charged to its store ([`crate::Cache::attach`]): from then on the
/// store counts it, and its drop gives the store its bytes back.
const ATTACHED: u8 = 128;

/// What few objects have, kept apart from [`Object`].
#[derive(Debug, Default)]
pub(crate) struct Extra {
    vary: Option<VarySpec>,
    /// The parsed program, set before the body completes.
    esi: OnceLock<Attr>,
    /// For a body stored gzip'd: its bits, CRC and length, known once
    /// the fetch has checked it.
    gzip: OnceLock<Attr>,
    /// Its body in other codings (br, zstd), made once when first asked
    /// for ([`crate::rendition`], [`slots`]).
    pub(crate) renditions: [slots::Slot; slots::SLOTS],
    /// Its surrogate keys, once indexed under them.
    pub(crate) tags: OnceLock<Box<[Box<[u8]>]>>,
    /// Where a persistent store wrote its record, plus one (0: nowhere;
    /// see [`Object::record`]).
    record: AtomicU64,
}

pub(crate) use crate::heap::NOT_QUEUED;

/// A time as the LRU stamps it: milliseconds, modulo 2^32.
fn lru_ms(t: f64) -> u32 {
    (t.max(0.0) * 1000.0) as u64 as u32
}

/// Everything needed to make an object.
#[derive(Debug)]
pub struct ObjectInit {
    pub xid: u64,
    /// The store it is charged to once attached ([`crate::Cache::attach`]).
    pub store: Option<Arc<Store>>,
    pub kind: ObjKind,
    pub status: u16,
    /// The status line and the fields; when it is text that holds no
    /// field, the fields of `headers` are written into it. The object
    /// keeps it packed, in an allocation of its own.
    pub head: StoredHead,
    /// The fields, as the head holds them.
    pub headers: Headers,
    pub body: Body,
    pub vary: Option<VarySpec>,
    pub timers: Timers,
}

/// A new object's head: the text of its status line and fields, each
/// line ending in CRLF, without the blank line; or that text packed
/// already, as the object keeps it.
#[derive(Debug)]
pub enum StoredHead {
    Text(Bytes),
    Packed(PackedHead),
}

/// A head packed by [`StoredHead::pack`].
#[derive(Debug)]
pub struct PackedHead(packed::Kept);

impl StoredHead {
    /// Packs a head's text for an object of status `status` (the usual
    /// status line is the one for that status). A fetch builds the text
    /// in room it keeps and packs it: the object's allocation is then
    /// the only one that stays, and no larger one made before it is let
    /// go after it (which leaves holes between objects with glibc's
    /// allocator).
    pub fn pack(text: &[u8], status: u16) -> StoredHead {
        StoredHead::Packed(PackedHead(packed::pack(text, status)))
    }
}

impl From<Bytes> for StoredHead {
    fn from(text: Bytes) -> StoredHead {
        StoredHead::Text(text)
    }
}

/// Fixed bookkeeping cost charged to storage for every object, on top of
/// its head and body: what an object costs in memory besides its bytes,
/// as `bench/objects.sh` measures it (the object in its `Arc`, its index
/// entry, its expiry and LRU entries, the allocator's rounding to its
/// size classes), so that a store's budget bounds the memory its objects
/// take.
pub const OBJECT_OVERHEAD: u64 = 258;

impl Object {
    pub fn new(init: ObjectInit) -> Self {
        let head = match init.head {
            StoredHead::Packed(PackedHead(packed)) => packed,
            StoredHead::Text(text) => {
                // Fields given without a head (markers, tests) are written
                // into it after its status line.
                let line_end = text
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .map_or(text.len(), |p| p + 2);
                if !init.headers.is_empty() && text.len() <= line_end {
                    let mut head = text.to_vec();
                    if head.is_empty() {
                        head.extend_from_slice(
                            format!(
                                "HTTP/1.1 {} {}\r\n",
                                init.status,
                                lacquer_http::reason_phrase(init.status)
                            )
                            .as_bytes(),
                        );
                    }
                    init.headers.write_to(&mut head);
                    packed::pack(&head, init.status)
                } else {
                    packed::pack(&text, init.status)
                }
            }
        };
        let extra = OnceBox::new();
        if init.vary.is_some() {
            let _ = extra.set(Box::new(Extra {
                vary: init.vary,
                ..Extra::default()
            }));
        }
        let mut obj = Object {
            // Ids from a store written by another build keep their low
            // bits, as the log shows them.
            xid: (init.xid & u64::from(u32::MAX)) as u32,
            status_kind: (if init.status < 1024 {
                init.status
            } else {
                init.status % 1000
            }) | (init.kind as u16) << KIND_SHIFT,
            head,
            body: init.body,
            t_origin: AtomicF64::new(init.timers.t_origin),
            ttl: AtomicF64::new(init.timers.ttl),
            grace: AtomicF32::new(init.timers.grace),
            keep: AtomicF32::new(init.timers.keep),
            hits: AtomicU32::new(0),
            min_fresh_miss: AtomicU8::new(0),
            digest: [AtomicU64::new(0), AtomicU64::new(0)],
            flags: AtomicU8::new(0),
            store: init.store,
            allocated: AtomicU64::new(0),
            lru_slot: AtomicU32::new(u32::MAX),
            lru_stamp: AtomicU32::new(0),
            exp_slot: AtomicU32::new(NOT_QUEUED),
            ban_seq: AtomicU64::new(0),
            ban: BanPlace::default(),
            extra,
        };
        // Read once from the stored head, in one pass (what a restart
        // reads back too).
        let (mut accept_ranges, mut encoding, mut length) = (false, None, false);
        for (name, value) in obj.fields() {
            if name.eq_ignore_ascii_case(b"accept-ranges") {
                accept_ranges = true;
            } else if name.eq_ignore_ascii_case(b"content-length") {
                length = true;
            } else if name.eq_ignore_ascii_case(b"content-encoding") {
                encoding.get_or_insert(value);
            }
        }
        let coding = encoding.map(|v| v.bytes());
        let gzipped = coding
            .as_deref()
            .is_some_and(lacquer_http::headers::is_gzip);
        let other = !gzipped && coding.is_some_and(|v| !v.trim_ascii().is_empty());
        let flags =
            if accept_ranges { ACCEPT_RANGES } else { 0 } | if gzipped { GZIPPED } else { 0 };
        if other {
            obj.status_kind |= OTHER_CODING;
        }
        if length {
            obj.status_kind |= HEAD_LENGTH;
        }
        *obj.flags.get_mut() = flags;
        obj
    }

    /// The vxid of the fetch that made it.
    #[inline]
    pub fn xid(&self) -> u64 {
        u64::from(self.xid)
    }

    #[inline]
    pub fn kind(&self) -> ObjKind {
        match self.status_kind >> KIND_SHIFT {
            0 => ObjKind::Normal,
            1 => ObjKind::HitMiss,
            _ => ObjKind::HitPass,
        }
    }

    #[inline]
    pub fn status(&self) -> u16 {
        self.status_kind & STATUS_BITS
    }

    #[inline]
    pub fn body(&self) -> &Body {
        &self.body
    }

    /// What its `Vary` asked of the request that fetched it.
    #[inline]
    pub fn vary(&self) -> Option<&VarySpec> {
        self.extra.get()?.vary.as_ref()
    }

    /// Whether the box of rare fields was made.
    #[cfg(test)]
    pub(crate) fn has_extra(&self) -> bool {
        self.extra.get().is_some()
    }

    /// What few objects have, made when first needed.
    pub(crate) fn extra(&self) -> &Extra {
        self.extra.get_or_init(|| Box::new(Extra::default()))
    }

    /// Its surrogate keys, once indexed under them.
    pub(crate) fn tags(&self) -> Option<&[Box<[u8]>]> {
        self.extra.get()?.tags.get().map(|t| &t[..])
    }

    #[inline]
    pub fn etag(&self) -> Option<Bytes> {
        self.header("etag")
    }

    /// `Last-Modified` as a time (read from the head when asked: only
    /// conditional requests ask).
    pub fn last_modified(&self) -> Option<f64> {
        let (_, value) = self.fields().find(|(n, _)| name_eq(n, b"last-modified"))?;
        match value {
            FieldValue::Date(secs) => Some(f64::from(secs)),
            FieldValue::Slice(text) => lacquer_core::time::parse_http_date(text),
        }
    }

    /// The stored headers include `Accept-Ranges`.
    #[inline]
    pub fn accept_ranges(&self) -> bool {
        self.flag(ACCEPT_RANGES)
    }

    /// The stored body is gzip'd.
    #[inline]
    pub fn gzipped(&self) -> bool {
        self.flag(GZIPPED)
    }

    /// Whether the stored body has a `Content-Encoding` other than gzip.
    #[inline]
    pub fn other_coding(&self) -> bool {
        self.status_kind & OTHER_CODING != 0
    }

    /// Whether the stored head has a `Content-Length`.
    #[inline]
    pub fn head_has_length(&self) -> bool {
        self.status_kind & HEAD_LENGTH != 0
    }

    /// Whether renditions of it were found not to suit.
    #[inline]
    pub fn no_rendition(&self) -> bool {
        self.flag(NO_RENDITION)
    }

    /// Marks it as not to have renditions.
    pub fn set_no_rendition(&self) {
        self.flags.fetch_or(NO_RENDITION, Ordering::Release);
    }

    /// What few objects have, if made.
    pub(crate) fn extra_if_made(&self) -> Option<&Extra> {
        self.extra.get()
    }

    #[inline]
    fn flag(&self, flag: u8) -> bool {
        self.flags.load(Ordering::Acquire) & flag != 0
    }

    /// Marks it removed; true when it already was.
    pub(crate) fn mark_removed(&self) -> bool {
        self.flags.fetch_or(REMOVED, Ordering::AcqRel) & REMOVED != 0
    }

    /// The digest it is indexed under, once it is.
    pub(crate) fn digest(&self) -> Option<Digest> {
        self.flag(INDEXED).then(|| {
            Digest::from_halves([
                self.digest[0].load(Ordering::Relaxed),
                self.digest[1].load(Ordering::Relaxed),
            ])
        })
    }

    /// Notes the digest it is indexed under (once).
    pub(crate) fn set_digest(&self, d: Digest) {
        if self.flag(INDEXED) {
            return;
        }
        let [a, b] = d.halves();
        self.digest[0].store(a, Ordering::Relaxed);
        self.digest[1].store(b, Ordering::Relaxed);
        self.flags.fetch_or(INDEXED, Ordering::Release);
    }

    /// On the protected eviction list.
    pub(crate) fn lru_protected(&self) -> bool {
        self.flag(LRU_PROTECTED)
    }

    pub(crate) fn set_lru_protected(&self, on: bool) {
        if on {
            self.flags.fetch_or(LRU_PROTECTED, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!LRU_PROTECTED, Ordering::Relaxed);
        }
    }

    /// Notes that it moved on the LRU lists at `now`.
    pub(crate) fn set_lru_stamp(&self, now: f64) {
        self.lru_stamp.store(lru_ms(now), Ordering::Relaxed);
    }

    /// Seconds since it last moved on the LRU lists (less than 49 days
    /// are told apart).
    pub(crate) fn since_lru_stamp(&self, now: f64) -> f64 {
        f64::from(lru_ms(now).wrapping_sub(self.lru_stamp.load(Ordering::Relaxed))) / 1000.0
    }

    /// How many times it was hit (`obj.hits`).
    pub fn hits(&self) -> u64 {
        u64::from(self.hits.load(Ordering::Relaxed))
    }

    /// Where a persistent store wrote its record's state word
    /// (`u64::MAX`: nowhere). Kept in [`Extra`]: most objects have none.
    pub(crate) fn record(&self) -> u64 {
        self.extra
            .get()
            .map_or(0, |e| e.record.load(Ordering::Acquire))
            .wrapping_sub(1)
    }

    /// Notes where its record's state word is (`u64::MAX`: nowhere).
    pub(crate) fn set_record(&self, at: u64) {
        if at != u64::MAX || self.extra.get().is_some() {
            self.extra()
                .record
                .store(at.wrapping_add(1), Ordering::Release);
        }
    }

    /// Notes a new place for its record's state word; returns the old.
    pub(crate) fn swap_record(&self, at: u64) -> u64 {
        match self.extra.get() {
            Some(e) => e
                .record
                .swap(at.wrapping_add(1), Ordering::AcqRel)
                .wrapping_sub(1),
            // No record was ever written, and none is being.
            None => u64::MAX,
        }
    }

    /// Whether a conditional fetch can revalidate it: a whole 200 with an
    /// `ETag` or a strong `Last-Modified`.
    pub fn can_revalidate(&self) -> bool {
        self.kind() == ObjKind::Normal
            && self.status() == 200
            && self.body.is_complete()
            && (self.has_header("etag") || self.strong_last_modified().is_some())
    }

    /// The `Last-Modified` field when it is a strong validator (RFC 9110
    /// 8.8.2.2): at least a second before the response's `Date` (the time
    /// it was fetched when the origin sent none). One equal to `Date`
    /// cannot tell two changes within that second apart, so it is never
    /// sent back as `If-Modified-Since`.
    pub fn strong_last_modified(&self) -> Option<Bytes> {
        let lm = self.last_modified()?;
        let date = self
            .header("date")
            .and_then(|d| lacquer_core::time::parse_http_date(&d))
            .unwrap_or_else(|| self.t_origin.get());
        if lm <= date - 1.0 {
            self.header("last-modified")
        } else {
            None
        }
    }

    /// Says, before the object is shared, that its fetch parses the body
    /// for ESI: delivery then waits for the whole body and the program.
    pub fn expect_esi(&self) {
        self.flags.fetch_or(ESI_EXPECTED, Ordering::Release);
    }

    /// Whether the body is being (or was) parsed for ESI.
    pub fn esi_expected(&self) -> bool {
        self.flag(ESI_EXPECTED)
    }

    /// Stores the body's ESI program (parsed, or taken over from the
    /// object a 304 revalidated); call before the body is finished.
    pub fn set_esi(&self, program: Attr) {
        let _ = self.extra().esi.set(program);
    }

    /// Records what a gzip'd body's scan found (what splicing needs).
    pub fn set_gzip(&self, scanned: Attr) {
        let _ = self.extra().gzip.set(scanned);
    }

    /// What splicing needs of a gzip'd body, once it is complete, as the
    /// daemon stored it.
    pub fn gzip<T: std::any::Any>(&self) -> Option<&T> {
        self.gzip_attr()?.downcast_ref()
    }

    /// The gzip attribute as stored, to share with another object.
    pub fn gzip_attr(&self) -> Option<&Attr> {
        self.extra.get()?.gzip.get()
    }

    /// The ESI attribute as stored, to share with another object.
    pub fn esi_attr(&self) -> Option<&Attr> {
        self.extra.get()?.esi.get()
    }

    /// The ESI program, once parsed (`None` for a body that was not
    /// processed), as the daemon stored it.
    pub fn esi<T: std::any::Any>(&self) -> Option<&T> {
        self.esi_attr()?.downcast_ref()
    }

    pub fn timers(&self) -> Timers {
        Timers {
            t_origin: self.t_origin.get(),
            ttl: self.ttl.get(),
            grace: self.grace.get(),
            keep: self.keep.get(),
        }
    }

    pub fn set_timers(&self, t: Timers) {
        self.t_origin.set(t.t_origin);
        self.ttl.set(t.ttl);
        self.grace.set(t.grace);
        self.keep.set(t.keep);
    }

    /// Seconds of TTL left (negative once stale).
    #[inline]
    /// Whether a request's `min-fresh` (RFC 9111 §5.2.1.3) of `min_fresh`
    /// seconds may make this object, with `left` seconds of freshness, a
    /// miss now. Not when it asks more than the object's whole lifetime
    /// (no copy could ever satisfy it), and at most once a second for one
    /// object, so that clients cannot turn every hit into a revalidation.
    pub fn min_fresh_refuses(&self, min_fresh: f64, left: f64, now: f64) -> bool {
        if min_fresh <= 0.0 || left > min_fresh || min_fresh >= self.ttl.get() {
            return false;
        }
        // The second it last happened in, modulo 2^8: of two refusals a
        // multiple of 256 seconds apart to the second, the second is a
        // hit instead, nothing worse.
        let second = now.max(1.0) as u64 as u8;
        if self.min_fresh_miss.swap(second, Ordering::Relaxed) == second {
            return false;
        }
        true
    }

    pub fn ttl_left(&self, now: f64) -> f64 {
        self.t_origin.get() + self.ttl.get() - now
    }

    /// Whole seconds since the response was generated, for `Age`.
    pub fn age(&self, now: f64) -> u64 {
        (now - self.t_origin.get()).max(0.0) as u64
    }

    /// When the object leaves the cache.
    pub fn expires_at(&self) -> f64 {
        let t = self.timers();
        t.t_origin + t.lifetime()
    }

    /// The name of the store holding the object, once attached.
    pub fn store_name(&self) -> Option<&str> {
        self.store().map(|s| s.name())
    }

    /// The store holding the object, once attached.
    #[inline]
    pub(crate) fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref().filter(|_| self.flag(ATTACHED))
    }

    /// Marks it charged to its store; false if it has none or already was.
    pub(crate) fn set_attached(&self) -> bool {
        self.store.is_some() && self.flags.fetch_or(ATTACHED, Ordering::AcqRel) & ATTACHED == 0
    }

    /// Whether the object was never put in the index (pass, synthetic).
    pub fn key_is_unset(&self) -> bool {
        !self.flag(INDEXED)
    }

    pub fn is_removed(&self) -> bool {
        self.flag(REMOVED)
    }

    /// The number of the newest ban the object is known to survive.
    #[inline]
    pub fn ban_seq(&self) -> u64 {
        self.ban_seq.load(Ordering::Acquire)
    }

    /// Moves the object's place in the ban list forward (never back).
    pub(crate) fn set_ban(&self, ban: BanRef) {
        if self.ban.advance(&ban) {
            // The largest wins: of two moves at once, the later ban is
            // the place, and the number read without a lock follows it.
            self.ban_seq.fetch_max(ban.seq(), Ordering::AcqRel);
        }
    }

    /// Lets go of the object's ban once it has left the cache.
    pub(crate) fn release_ban(&self) {
        self.ban.release();
    }

    /// Its place in the expiry queue's heap.
    pub(crate) fn expiry_slot(&self) -> u32 {
        self.exp_slot.load(Ordering::Relaxed)
    }

    pub(crate) fn set_expiry_slot(&self, slot: u32) {
        self.exp_slot.store(slot, Ordering::Relaxed);
    }
}

/// An object on a store's LRU lists keeps its place in their expiry
/// queue and its segment.
impl crate::lru::Listed for Object {
    fn expiry_slot(&self) -> u32 {
        Object::expiry_slot(self)
    }

    fn set_expiry_slot(&self, at: u32) {
        Object::set_expiry_slot(self, at);
    }

    fn set_lru_protected(&self, on: bool) {
        Object::set_lru_protected(self, on);
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        let allocated = *self.allocated.get_mut();
        if let Some(store) = self.store() {
            store.release(allocated);
        }
    }
}
