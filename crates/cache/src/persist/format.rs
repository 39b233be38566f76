//! The persistent store's file layout, byte by byte (little-endian).
//!
//! - **Superblock** (the first 4 KiB): magic, format version, file size,
//!   segment size, the store's secret, a checksum. Written once when the
//!   file is made.
//! - **Segments** after it, each `segment_len` bytes: a 64-byte header
//!   (magic, the segment's sequence number, the secret, a checksum), then
//!   frames back to back, 8-byte aligned.
//! - **Frames**: a 16-byte header (payload length, the low 32 bits of the
//!   segment's sequence number, a word holding the tag and the state, a
//!   checksum), then the payload. A body
//!   frame holds body bytes; an object frame the object (key, variant,
//!   timers, head, where its body is and the body's checksum); a ban frame
//!   a ban's time and text; a rendition frame an object's body in another
//!   coding (the object's frame and its segment's number, the slot, the
//!   head and body). A build before renditions stops a segment's walk at
//!   one (it loses what that segment holds after it, nothing else).
//!
//! A reader walks a segment's frames by their lengths, so body bytes are
//! never read as a header. A frame whose sequence number is not its
//! segment's is left over from the segment's earlier use and ends the
//! walk. Checksums start from the store's secret: a body crafted to look
//! like a record cannot pass for one.

/// The superblock's first bytes; the format's version follows.
pub const MAGIC: &[u8; 16] = b"LACQUER-PERSIST\0";
/// The format this build writes and reads.
pub const VERSION: u32 = 1;
pub const SUPERBLOCK_LEN: u64 = 4096;
pub const SEGMENT_HEADER_LEN: u64 = 64;
pub const FRAME_HEADER_LEN: u64 = 16;
const SEGMENT_MAGIC: &[u8; 8] = b"LQSEGMNT";

/// Frame tags.
pub const TAG_BODY: u8 = 1;
pub const TAG_OBJECT: u8 = 2;
pub const TAG_BAN: u8 = 3;
/// An object's body in another coding (br, zstd), written after the
/// object's record, naming the record by where it is.
pub const TAG_RENDITION: u8 = 4;

/// The state of a live frame, in the three high bytes of its tag word;
/// a dead object frame's word is its tag alone.
pub const LIVE: u32 = 0x4c4956;
/// The word an object frame's tombstone writes.
pub const DEAD: u32 = TAG_OBJECT as u32;
/// Where the tag and state word is in a frame's header.
pub const STATE_OFFSET: u64 = 8;

/// A checksum keyed by the store's secret.
pub fn checksum(secret: u64, parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&secret.to_le_bytes());
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// Rounds a length up to the frames' alignment.
pub fn align(len: u64) -> u64 {
    len.div_ceil(8) * 8
}

/// What the superblock says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub file_len: u64,
    pub segment_len: u64,
    pub secret: u64,
}

/// Why a superblock cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum BadSuperblock {
    /// All zeros: a new file.
    Empty,
    /// Not a Lacquer persistent store.
    Foreign,
    /// A store of another format version.
    Version(u32),
    /// The magic is there but the checksum is wrong.
    Damaged,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.file_len.to_le_bytes());
        b.extend_from_slice(&self.segment_len.to_le_bytes());
        b.extend_from_slice(&self.secret.to_le_bytes());
        let sum = checksum(0, &[&b]);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Superblock, BadSuperblock> {
        if b.len() < 52 {
            return Err(BadSuperblock::Foreign);
        }
        if &b[..16] != MAGIC {
            return Err(if b[..52].iter().all(|&x| x == 0) {
                BadSuperblock::Empty
            } else {
                BadSuperblock::Foreign
            });
        }
        let version = u32_at(b, 16);
        if version != VERSION {
            return Err(BadSuperblock::Version(version));
        }
        if checksum(0, &[&b[..48]]) != u32_at(b, 48) {
            return Err(BadSuperblock::Damaged);
        }
        Ok(Superblock {
            version,
            file_len: u64_at(b, 24),
            segment_len: u64_at(b, 32),
            secret: u64_at(b, 40),
        })
    }
}

/// A segment header for `seq`.
pub fn segment_header(seq: u64, secret: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(SEGMENT_MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..24].copy_from_slice(&secret.to_le_bytes());
    let sum = checksum(secret, &[&b[..24]]);
    b[24..28].copy_from_slice(&sum.to_le_bytes());
    b
}

/// The sequence number of a valid segment header (None: never written,
/// torn, or another store's).
pub fn segment_seq(b: &[u8], secret: u64) -> Option<u64> {
    if b.len() < 28 || &b[..8] != SEGMENT_MAGIC || u64_at(b, 16) != secret {
        return None;
    }
    if checksum(secret, &[&b[..24]]) != u32_at(b, 24) {
        return None;
    }
    Some(u64_at(b, 8)).filter(|&s| s != 0)
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub tag: u8,
    pub len: u32,
    /// The low 32 bits of the segment's sequence number.
    pub seq: u32,
    /// [`LIVE`], or 0 for a dead object.
    pub state: u32,
    pub sum: u32,
}

/// The low 32 bits of a sequence number, as frames and records hold it.
pub fn short_seq(seq: u64) -> u32 {
    seq as u32
}

impl FrameHeader {
    fn raw(tag: u8, seq: u64, len: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&len.to_le_bytes());
        b[4..8].copy_from_slice(&short_seq(seq).to_le_bytes());
        b[8..12].copy_from_slice(&(u32::from(tag) | LIVE << 8).to_le_bytes());
        b
    }

    /// The header of a frame holding `payload`, its checksum over the
    /// length, sequence number, tag and payload.
    pub fn sealed(tag: u8, seq: u64, payload: &[u8], secret: u64) -> [u8; 16] {
        let mut b = Self::raw(tag, seq, payload.len() as u32);
        let sum = checksum(secret, &[&b[..9], payload]);
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// The header of a body frame of `len` bytes (its bytes are checked
    /// through the object that owns them).
    pub fn body(seq: u64, len: u32, secret: u64) -> [u8; 16] {
        let mut b = Self::raw(TAG_BODY, seq, len);
        let sum = checksum(secret, &[&b[..9]]);
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> FrameHeader {
        let word = u32_at(b, 8);
        FrameHeader {
            tag: word as u8,
            len: u32_at(b, 0),
            seq: u32_at(b, 4),
            state: word >> 8,
            sum: u32_at(b, 12),
        }
    }

    /// Whether the checksum holds for `payload` (for a body frame, the
    /// header alone).
    pub fn verify(&self, raw: &[u8], payload: &[u8], secret: u64) -> bool {
        let sum = if self.tag == TAG_BODY {
            checksum(secret, &[&raw[..9]])
        } else {
            checksum(secret, &[&raw[..9], payload])
        };
        sum == self.sum
    }
}

/// A whole frame: its sealed header, then `payload`.
pub fn sealed_frame(tag: u8, seq: u64, payload: &[u8], secret: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_HEADER_LEN as usize + payload.len());
    f.extend_from_slice(&FrameHeader::sealed(tag, seq, payload, secret));
    f.extend_from_slice(payload);
    f
}

/// An object as its frame holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// When it went into the index (bans newer than this apply to it).
    pub inserted: f64,
    pub xid: u64,
    pub status: u16,
    pub t_origin: f64,
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
    pub key: std::sync::Arc<[u8]>,
    pub vary: Vec<(String, Option<Vec<u8>>)>,
    /// Where the head is in the file (it is part of this frame).
    pub head: (u64, u64),
    /// The gzip attribute, encoded (empty: none).
    pub gzip: Vec<u8>,
    /// The body is parsed for ESI (`beresp.do_esi`), and its program,
    /// encoded (empty: none, a body that was not XML).
    pub esi: Option<Vec<u8>>,
    pub body_len: u64,
    pub body_sum: u32,
    /// Where the body is: start, length, and the sequence number of the
    /// segment it was written in.
    pub extents: Vec<(u64, u64, u64)>,
}

/// Writes an object frame's payload; `head` follows the fixed part, so
/// that it is one run of the file a view can share. Compact: the TTL,
/// grace and keep as 32-bit floats, the vxid in 32 bits, each run of the
/// body in 16 bytes (start, length, the low bits of its segment's
/// number), the body's length the sum of its runs.
///
/// A small body may come inline, after the head (`inline`): its one run
/// is then written as starting at 0, and read back as the bytes after
/// the head, with [`INLINE`] for its segment number.
pub fn encode_record(r: &Record, head: &[u8], inline: Option<&[u8]>) -> (Vec<u8>, u64) {
    let mut b = Vec::with_capacity(80 + r.key.len() + head.len());
    b.extend_from_slice(&r.inserted.to_le_bytes());
    b.extend_from_slice(&r.t_origin.to_le_bytes());
    for t in [r.ttl, r.grace, r.keep] {
        b.extend_from_slice(&(t as f32).to_le_bytes());
    }
    b.extend_from_slice(&(r.xid as u32).to_le_bytes());
    b.extend_from_slice(&r.status.to_le_bytes());
    put_short(&mut b, &r.key);
    b.extend_from_slice(&(r.vary.len() as u16).to_le_bytes());
    for (name, value) in &r.vary {
        put_short(&mut b, name.as_bytes());
        match value {
            Some(v) => {
                b.push(1);
                put_bytes(&mut b, v);
            }
            None => b.push(0),
        }
    }
    put_short(&mut b, &r.gzip);
    match &r.esi {
        Some(program) => {
            b.push(1);
            put_bytes(&mut b, program);
        }
        None => b.push(0),
    }
    b.extend_from_slice(&r.body_sum.to_le_bytes());
    b.extend_from_slice(&(r.extents.len() as u16).to_le_bytes());
    for (at, len, seq) in &r.extents {
        b.extend_from_slice(&at.to_le_bytes());
        b.extend_from_slice(&(*len as u32).to_le_bytes());
        b.extend_from_slice(&(*seq as u32).to_le_bytes());
    }
    b.extend_from_slice(&(head.len() as u32).to_le_bytes());
    let head_at = b.len() as u64;
    b.extend_from_slice(head);
    if let Some(body) = inline {
        b.extend_from_slice(body);
    }
    (b, head_at)
}

/// The segment number of a body written inline in its record.
pub const INLINE: u64 = u64::MAX;

/// How many bytes of a record's payload [`retime`] rewrites.
pub const TIMERS_END: usize = 28;

/// Rewrites the timers of an encoded record (a soft purge).
pub fn retime(payload: &mut [u8], t_origin: f64, ttl: f64, grace: f64, keep: f64) -> Option<()> {
    let timers = payload.get_mut(8..TIMERS_END)?;
    timers[..8].copy_from_slice(&t_origin.to_le_bytes());
    for (i, t) in [ttl, grace, keep].into_iter().enumerate() {
        timers[8 + i * 4..12 + i * 4].copy_from_slice(&(t as f32).to_le_bytes());
    }
    Some(())
}

/// Reads an object frame's payload found at `payload_at` in the file.
pub fn decode_record(b: &[u8], payload_at: u64) -> Option<Record> {
    let mut r = Reader { b, at: 0 };
    let inserted = r.f64()?;
    let t_origin = r.f64()?;
    let (ttl, grace, keep) = (r.f32()?, r.f32()?, r.f32()?);
    let xid = u64::from(r.u32()?);
    let status = r.u16()?;
    let key = std::sync::Arc::from(r.short()?);
    let nvary = r.u16()?;
    let mut vary = Vec::new();
    for _ in 0..nvary {
        let name = String::from_utf8(r.short()?.to_vec()).ok()?;
        let value = match r.take(1)?[0] {
            1 => Some(r.bytes()?.to_vec()),
            _ => None,
        };
        vary.push((name, value));
    }
    let gzip = r.short()?.to_vec();
    let esi = match r.take(1)?[0] {
        1 => Some(r.bytes()?.to_vec()),
        _ => None,
    };
    let body_sum = r.u32()?;
    let n = r.u16()? as usize;
    let mut extents = Vec::with_capacity(n.min(b.len() / 16));
    let mut body_len = 0u64;
    for _ in 0..n {
        let (at, len, seq) = (r.u64()?, u64::from(r.u32()?), u64::from(r.u32()?));
        body_len += len;
        extents.push((at, len, seq));
    }
    let head_len = r.u32()? as u64;
    let head_at = r.at as u64;
    r.take(head_len as usize)?;
    if let [(0, len, _)] = extents[..] {
        // Inline, after the head.
        let at = payload_at + r.at as u64;
        r.take(len as usize)?;
        extents[0] = (at, len, INLINE);
    }
    Some(Record {
        inserted,
        xid,
        status,
        t_origin,
        ttl: f64::from(ttl),
        grace: f64::from(grace),
        keep: f64::from(keep),
        key,
        vary,
        head: (payload_at + head_at, head_len),
        gzip,
        esi,
        body_len,
        body_sum,
        extents,
    })
}

/// What a restart reads of a record before the object is asked for:
/// enough to index it, expire it and evict it, without copying anything.
#[derive(Debug, Clone, PartialEq)]
pub struct Peek<'a> {
    pub inserted: f64,
    /// When its lifetime (TTL, grace and keep) ends.
    pub expires: f64,
    pub key: &'a [u8],
    pub head: &'a [u8],
    /// Where the body's runs are (start, length, segment number), none
    /// for a body written inline in the record.
    pub runs: Vec<(u64, u64, u32)>,
}

/// Reads what [`Peek`] holds off an object frame's payload; None when
/// the payload is not a whole record. The runs' vector is empty (no
/// allocation) for a body inline or absent.
pub fn peek_record(b: &[u8]) -> Option<Peek<'_>> {
    let mut r = Reader { b, at: 0 };
    let inserted = r.f64()?;
    let t_origin = r.f64()?;
    let (ttl, grace, keep) = (r.f32()?, r.f32()?, r.f32()?);
    let lifetime = f64::from(ttl) + f64::from(grace).max(0.0) + f64::from(keep).max(0.0);
    r.take(6)?;
    let key = r.short()?;
    for _ in 0..r.u16()? {
        r.short()?;
        if r.take(1)?[0] == 1 {
            r.bytes()?;
        }
    }
    r.short()?;
    if r.take(1)?[0] == 1 {
        r.bytes()?;
    }
    r.u32()?;
    let n = r.u16()? as usize;
    let first = r.at;
    r.take(n.checked_mul(16)?)?;
    let head_len = r.u32()? as usize;
    let head = r.take(head_len)?;
    let mut runs = Vec::new();
    let mut inline = 0;
    for i in 0..n {
        let run = &b[first + i * 16..first + i * 16 + 16];
        let (at, len, seq) = (u64_at(run, 0), u64::from(u32_at(run, 8)), u32_at(run, 12));
        if n == 1 && at == 0 {
            inline = len as usize;
        } else {
            runs.push((at, len, seq));
        }
    }
    r.take(inline)?;
    Some(Peek {
        inserted,
        expires: t_origin + lifetime,
        key,
        head,
        runs,
    })
}

/// The key of an object frame's payload (after the times, the vxid and
/// the status).
pub fn record_key(b: &[u8]) -> Option<&[u8]> {
    let mut r = Reader { b, at: 34 };
    r.short()
}

/// A ban frame's payload: its time and text.
pub fn encode_ban(time: f64, text: &str) -> Vec<u8> {
    let mut b = time.to_le_bytes().to_vec();
    put_bytes(&mut b, text.as_bytes());
    b
}

/// A rendition frame's payload.
pub fn encode_rendition(obj_at: u64, obj_seq: u32, slot: u8, head: &[u8], body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(21 + head.len() + body.len());
    b.extend_from_slice(&obj_at.to_le_bytes());
    b.extend_from_slice(&obj_seq.to_le_bytes());
    b.push(slot);
    put_bytes(&mut b, head);
    put_bytes(&mut b, body);
    b
}

/// A rendition frame, read.
#[derive(Debug, PartialEq, Eq)]
pub struct RenditionFrame<'a> {
    /// The object's frame.
    pub obj_at: u64,
    /// The number of the object's segment when it was written.
    pub obj_seq: u32,
    pub slot: u8,
    pub head: &'a [u8],
    pub body: &'a [u8],
}

pub fn decode_rendition(b: &[u8]) -> Option<RenditionFrame<'_>> {
    let mut r = Reader { b, at: 0 };
    let obj_at = r.u64()?;
    let obj_seq = r.u32()?;
    let slot = r.take(1)?[0];
    let head = r.bytes()?;
    let body = r.bytes()?;
    (r.at == b.len()).then_some(RenditionFrame {
        obj_at,
        obj_seq,
        slot,
        head,
        body,
    })
}

pub fn decode_ban(b: &[u8]) -> Option<(f64, String)> {
    let mut r = Reader { b, at: 0 };
    let time = r.f64()?;
    let text = String::from_utf8(r.bytes()?.to_vec()).ok()?;
    Some((time, text))
}

/// A field of at most 64 KiB, its length in 16 bits (longer is cut,
/// and the record then refused when read: writers check first).
fn put_short(b: &mut Vec<u8>, v: &[u8]) {
    let n = v.len().min(u16::MAX as usize);
    b.extend_from_slice(&(n as u16).to_le_bytes());
    b.extend_from_slice(&v[..n]);
}

fn put_bytes(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    b.extend_from_slice(v);
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

/// Reads fields off a payload, None past its end.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn f32(&mut self) -> Option<f32> {
        Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn short(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_bits(self.u64()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            inserted: 1000.5,
            xid: 42,
            status: 200,
            t_origin: 1000.0,
            ttl: 120.0,
            grace: 10.0,
            keep: 0.0,
            key: std::sync::Arc::from(&b"/a\0example.com\0"[..]),
            vary: vec![
                ("accept-language".into(), Some(b"en".to_vec())),
                ("x-none".into(), None),
            ],
            head: (0, 0),
            gzip: vec![1, 2, 3],
            esi: Some(vec![4, 5]),
            body_len: 5,
            body_sum: 7,
            extents: vec![(4096 + 88, 5, 3)],
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let r = record();
        let head = b"HTTP/1.1 200 OK\r\nEtag: \"x\"\r\n";
        let (payload, head_at) = encode_record(&r, head, None);
        let back = decode_record(&payload, 1000).unwrap();
        assert_eq!(back.head, (1000 + head_at, head.len() as u64));
        assert_eq!(
            &payload[head_at as usize..][..head.len()],
            &head[..],
            "the head is one run"
        );
        assert_eq!(
            Record {
                head: (0, 0),
                ..back
            },
            r
        );
        let inline = Record {
            extents: vec![(0, 5, 0)],
            ..r.clone()
        };
        let (with_body, _) = encode_record(&inline, head, Some(b"hello"));
        let back_inline = decode_record(&with_body, 1000).unwrap();
        let body_at = 1000 + head_at + head.len() as u64;
        assert_eq!(back_inline.extents, vec![(body_at, 5, INLINE)]);
        assert_eq!(&with_body[(body_at - 1000) as usize..], b"hello");
        assert!(decode_record(&with_body[..with_body.len() - 1], 1000).is_none());
        for cut in 0..payload.len() {
            assert!(
                decode_record(&payload[..cut], 0).is_none(),
                "a short payload is refused ({cut})"
            );
        }
    }

    #[test]
    fn a_peek_reads_what_a_restart_indexes() {
        let r = record();
        let head = b"HTTP/1.1 200 OK\r\nXkey: a\r\n";
        let (payload, _) = encode_record(&r, head, None);
        let p = peek_record(&payload).unwrap();
        assert_eq!(p.inserted, r.inserted);
        assert_eq!(p.expires, r.t_origin + 120.0 + 10.0);
        assert_eq!(p.key, &r.key[..]);
        assert_eq!(record_key(&payload), Some(&r.key[..]));
        assert_eq!(p.head, &head[..]);
        assert_eq!(p.runs, vec![(4096 + 88, 5, 3)]);
        let inline = Record {
            extents: vec![(0, 5, 0)],
            ..r.clone()
        };
        let (with_body, _) = encode_record(&inline, head, Some(b"hello"));
        assert!(peek_record(&with_body).unwrap().runs.is_empty());
        for cut in 0..with_body.len() {
            assert!(peek_record(&with_body[..cut]).is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn checksums_need_the_secret() {
        let payload = b"payload";
        let raw = FrameHeader::sealed(TAG_OBJECT, 9, payload, 77);
        let h = FrameHeader::decode(&raw);
        assert_eq!((h.tag, h.len, h.seq, h.state), (TAG_OBJECT, 7, 9, LIVE));
        let mut dead = raw;
        dead[8..12].copy_from_slice(&DEAD.to_le_bytes());
        let d = FrameHeader::decode(&dead);
        assert_eq!(
            (d.tag, d.state),
            (TAG_OBJECT, 0),
            "a tombstone keeps the tag"
        );
        assert!(h.verify(&raw, payload, 77));
        assert!(!h.verify(&raw, payload, 78), "another store's secret");
        assert!(!h.verify(&raw, b"paylaod", 77), "a flipped byte");
        let body = FrameHeader::body(9, 100, 77);
        assert!(FrameHeader::decode(&body).verify(&body, &[], 77));
    }

    #[test]
    fn superblocks_and_segment_headers() {
        let sb = Superblock {
            version: VERSION,
            file_len: 1 << 30,
            segment_len: 8 << 20,
            secret: 0x1234,
        };
        let mut raw = sb.encode();
        assert_eq!(Superblock::decode(&raw), Ok(sb));
        assert_eq!(Superblock::decode(&[0u8; 64]), Err(BadSuperblock::Empty));
        assert_eq!(Superblock::decode(&[7u8; 64]), Err(BadSuperblock::Foreign));
        raw[40] ^= 1;
        assert_eq!(Superblock::decode(&raw), Err(BadSuperblock::Damaged));
        raw[16] = 9;
        assert_eq!(Superblock::decode(&raw), Err(BadSuperblock::Version(9)));
        let seg = segment_header(5, 0x1234);
        assert_eq!(segment_seq(&seg, 0x1234), Some(5));
        assert_eq!(segment_seq(&seg, 0x1235), None);
        assert_eq!(segment_seq(&[0u8; 32], 0x1234), None);
    }
}
