//! The filters a fetched body passes through on its way into storage,
//! chosen as Varnish chooses them from `beresp.do_gzip`, `do_gunzip`,
//! `do_esi`, the response's `Content-Encoding` and `http_gzip_support`:
//! gunzip, gzip, a test gunzip of gzip bodies stored as they came (so a
//! corrupt one fails the fetch instead of reaching clients), and the ESI
//! parse, which needs the whole body. Each leaves a `Gzip` record, and
//! the ESI parse its `ESI_xmlerror` records and counters.

use crate::host::coding::recoding;
use crate::host::head_edits::weaken_etag;
use bytes::Bytes;
use lacquer_core::counters::{Counter, COUNTERS};
use lacquer_core::params::{Feature, Params};
use lacquer_filters::coding::{Coding, CodingError, Decoder, Encoder};
use lacquer_filters::esi::{self, Options, Program};
use lacquer_filters::gzip::{is_gzip, Gunzip, Gzip, GzipError, INFLATE_SLICE};
use lacquer_filters::splice::{self, GzipBits, Scan, Scanned};
use lacquer_http::Headers;
use lacquer_shm::{Tag, Txn};

/// What VCL asked of the body.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wanted {
    pub do_esi: bool,
    pub do_gzip: bool,
    pub do_gunzip: bool,
    /// `beresp.filters` named br or zstd.
    pub encode: Option<Coding>,
    /// `beresp.filters` named unbr or unzstd.
    pub decode: Option<Coding>,
}

enum Zip {
    None,
    /// A br or zstd body decoded.
    Decode(Box<Decoder>, Coding),
    /// A plain body compressed with br or zstd.
    Encode(Box<Encoder>, Coding),
    Gzip(Box<Gzip>),
    Gunzip(Box<Gunzip>),
    /// Inflated only to check it and find its block bits; the stored
    /// bytes are the input.
    Test(Box<Scan>),
}

/// The chain for one fetch.
pub(crate) struct FetchFilters {
    zip: Zip,
    /// The body collected for the ESI parse.
    esi: Option<Vec<u8>>,
    /// An ESI page stored gzip'd, compressed at this level once parsed.
    esi_gzip: Option<u32>,
}

/// What one step of [`FetchFilters::push_some`] did.
pub(crate) struct Pushed {
    /// Input bytes taken.
    pub used: usize,
    /// Bytes to store now.
    pub piece: Option<Bytes>,
    /// The filter may hold more output: step again.
    pub more: bool,
}

/// What a finished body leaves to store.
pub(crate) struct Finished {
    /// The last bytes to store (an ESI page: all of them).
    pub tail: Option<Bytes>,
    pub program: Option<Program>,
    /// For a body stored gzip'd: its bits, CRC and length.
    pub gzip: Option<Scanned>,
}

fn coding_error(e: CodingError) -> GzipError {
    GzipError(e.0)
}

/// The level `beresp.filters` br and zstd compress at.
fn level_of(p: &Params, c: Coding) -> i32 {
    match c {
        Coding::Zstd => p.zstd_level() as i32,
        _ => p.brotli_level() as i32,
    }
}

/// Adds `Accept-Encoding` to `Vary` unless it is named already.
fn vary_accept_encoding(headers: &mut Headers) {
    let named = headers.get_all("vary").any(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"accept-encoding"))
    });
    if named {
        return;
    }
    match headers.get("vary").cloned() {
        Some(v) if !v.trim_ascii().is_empty() => {
            let mut joined = v.to_vec();
            joined.extend_from_slice(b", Accept-Encoding");
            headers.set("Vary", joined);
        }
        _ => headers.set("Vary", Bytes::from_static(b"Accept-Encoding")),
    }
}

impl FetchFilters {
    /// Chooses the chain and edits the stored headers to match it
    /// (`Content-Encoding`, a weakened `ETag`, `Vary`). `bodyless`
    /// responses get none.
    pub fn choose(p: &Params, want: Wanted, headers: &mut Headers, bodyless: bool) -> Self {
        if bodyless {
            return FetchFilters {
                zip: Zip::None,
                esi: None,
                esi_gzip: None,
            };
        }
        let encoding = headers.get("content-encoding").cloned();
        let gzipped = encoding.as_deref().is_some_and(is_gzip);
        let plain = encoding.is_none();
        let support = p.http_gzip_support();
        let coded = encoding.as_deref().and_then(Coding::from_token);
        let (decode, encode) = recoding(want.do_esi, want.encode, want.decode, coded, plain);
        if let Some(c) = decode {
            headers.remove("content-encoding");
            weaken_etag(headers);
            return FetchFilters {
                zip: Zip::Decode(Box::new(Decoder::new(c).expect("br and zstd decode")), c),
                esi: want.do_esi.then(Vec::new),
                esi_gzip: None,
            };
        }
        if let Some(c) = encode {
            match Encoder::new(c, level_of(p, c), None) {
                Ok(e) => {
                    headers.set("Content-Encoding", Bytes::from_static(c.token().as_bytes()));
                    vary_accept_encoding(headers);
                    weaken_etag(headers);
                    return FetchFilters {
                        zip: Zip::Encode(Box::new(e), c),
                        esi: None,
                        esi_gzip: None,
                    };
                }
                Err(_) => COUNTERS.inc(Counter::n_compress_fail),
            }
        }
        // Stored br or zstd as it came, decoded for whoever does not
        // take it: the response varies by Accept-Encoding.
        if support && coded.is_some_and(Coding::is_rendition) {
            vary_accept_encoding(headers);
        }
        // ESI needs the text: a gzip'd page is inflated to be parsed, and
        // stored gzip'd again (in pieces that splice) unless VCL asked
        // for it plain; a plain page is compressed so with do_gzip.
        let esi_gzip =
            want.do_esi && support && !want.do_gunzip && (gzipped || (plain && want.do_gzip));
        let gunzip = gzipped && (want.do_esi || (support && want.do_gunzip));
        let gzip = !gunzip && plain && support && want.do_gzip && !want.do_esi;
        if esi_gzip && plain {
            headers.set("Content-Encoding", Bytes::from_static(b"gzip"));
            vary_accept_encoding(headers);
        }
        let zip = if gunzip {
            if !esi_gzip {
                headers.remove("content-encoding");
            }
            weaken_etag(headers);
            Zip::Gunzip(Box::default())
        } else if gzip {
            headers.set("Content-Encoding", Bytes::from_static(b"gzip"));
            vary_accept_encoding(headers);
            weaken_etag(headers);
            Zip::Gzip(Box::new(Gzip::new(p.gzip_level() as u32)))
        } else if gzipped && support {
            Zip::Test(Box::default())
        } else {
            Zip::None
        };
        // Stored re-compressed: not the backend's bytes. (A page
        // delivered with its includes expanded is weakened then.)
        if esi_gzip {
            weaken_etag(headers);
        }
        // Stored gzip'd, delivered inflated to whoever does not take gzip:
        // the response varies by Accept-Encoding (as Varnish says).
        if support && (esi_gzip || gzip || (gzipped && !gunzip)) {
            vary_accept_encoding(headers);
        }
        FetchFilters {
            zip,
            esi: want.do_esi.then(Vec::new),
            esi_gzip: esi_gzip.then(|| p.gzip_level() as u32),
        }
    }

    /// Whether the stored length differs from the backend's.
    pub fn changes_length(&self) -> bool {
        self.recodes() || self.esi.is_some()
    }

    /// Whether the body is compressed or inflated on its way in.
    pub fn recodes(&self) -> bool {
        matches!(
            self.zip,
            Zip::Gzip(_) | Zip::Gunzip(_) | Zip::Decode(..) | Zip::Encode(..)
        )
    }

    /// Bytes held for the ESI parse so far (storage is charged for them
    /// as they come, so a huge page fails the fetch instead of growing
    /// memory unchecked).
    pub fn held(&self) -> usize {
        self.esi.as_ref().map_or(0, Vec::len)
    }

    /// Whether delivery has to wait for the ESI program.
    pub fn is_esi(&self) -> bool {
        self.esi.is_some()
    }

    /// Puts a piece of body through; returns what is to be stored now
    /// (nothing while the ESI parse collects the body).
    #[cfg(test)]
    pub fn push(&mut self, chunk: &[u8]) -> Result<Option<Bytes>, GzipError> {
        let mut rest = chunk;
        let mut out: Option<Vec<u8>> = None;
        loop {
            let pushed = self.push_some(rest)?;
            rest = &rest[pushed.used..];
            if let Some(piece) = pushed.piece {
                out.get_or_insert_with(Vec::new).extend_from_slice(&piece);
            }
            if rest.is_empty() && !pushed.more {
                return Ok(out.map(Bytes::from));
            }
        }
    }

    /// Puts the front of a piece of body through, inflating at most
    /// [`INFLATE_SLICE`] of it at a time (a thousandfold gzip body never
    /// becomes one huge buffer): what it took, what is to be stored now
    /// (nothing while the ESI parse collects the body), and whether to
    /// call again even with nothing left.
    #[cfg(test)]
    pub fn push_some(&mut self, chunk: &[u8]) -> Result<Pushed, GzipError> {
        self.push_from(chunk, None)
    }

    /// [`FetchFilters::push_some`] of `chunk[at..]`; with `views`, what
    /// goes through untouched is a view of `chunk`, not a copy: for a
    /// body that copies what it keeps itself (a small body on the heap,
    /// `Body::copy_small`), which would otherwise be copied twice.
    pub fn push_some_of(
        &mut self,
        chunk: &Bytes,
        at: usize,
        views: bool,
    ) -> Result<Pushed, GzipError> {
        self.push_from(&chunk[at..], views.then_some((chunk, at)))
    }

    fn push_from(
        &mut self,
        chunk: &[u8],
        view: Option<(&Bytes, usize)>,
    ) -> Result<Pushed, GzipError> {
        let (used, out, more) = match &mut self.zip {
            Zip::None => (chunk.len(), None, false),
            Zip::Gzip(z) => (chunk.len(), Some(z.push(chunk)), false),
            Zip::Gunzip(z) => {
                let (used, out, more) = z.push_some(chunk, INFLATE_SLICE)?;
                (used, Some(out), more)
            }
            Zip::Test(z) => {
                z.push(chunk)?;
                (chunk.len(), None, false)
            }
            Zip::Decode(d, _) => {
                let (used, out, more) = d.push_some(chunk, INFLATE_SLICE).map_err(coding_error)?;
                (used, Some(out), more)
            }
            Zip::Encode(e, _) => (
                chunk.len(),
                Some(e.push(chunk).map_err(coding_error)?),
                false,
            ),
        };
        let bytes: &[u8] = out.as_deref().unwrap_or(&chunk[..used]);
        let piece = match &mut self.esi {
            Some(collected) => {
                collected.extend_from_slice(bytes);
                None
            }
            // Copied when untouched, so the object holds exactly its bytes
            // and not the connection's read buffer (unless the body copies
            // them itself).
            None => Some(out.unwrap_or_else(|| match view {
                Some((whole, at)) => whole.slice(at..at + used),
                None => Bytes::copy_from_slice(&chunk[..used]),
            })),
        };
        Ok(Pushed {
            used,
            piece: piece.filter(|p| !p.is_empty()),
            more,
        })
    }

    /// Ends the body: the last bytes to store, the ESI program when the
    /// body was parsed, and what splicing needs of a gzip'd body. Logs
    /// the work done.
    pub fn finish(self, p: &Params, base_url: &[u8], log: &mut Txn) -> Result<Finished, GzipError> {
        let esi_flag = if self.esi.is_some() { 'E' } else { '-' };
        let mut gzip = None;
        let tail = match self.zip {
            Zip::None => None,
            Zip::Gzip(z) => {
                COUNTERS.inc(Counter::n_gzip);
                let (i, o) = z.counts();
                let (tail, scanned) = z.finish()?;
                let o = o + tail.len() as u64;
                gzip_record(log, 'G', esi_flag, i, o, scanned.bits);
                gzip = Some(scanned);
                Some(tail)
            }
            Zip::Gunzip(z) => {
                COUNTERS.inc(Counter::n_gunzip);
                let (i, o) = z.counts();
                let (tail, scanned) = z.finish()?;
                gzip_record(log, 'U', esi_flag, i, o + tail.len() as u64, scanned.bits);
                Some(tail)
            }
            Zip::Decode(d, c) => {
                d.finish().map_err(coding_error)?;
                COUNTERS.inc(match c {
                    Coding::Zstd => Counter::n_unzstd,
                    _ => Counter::n_unbrotli,
                });
                None
            }
            Zip::Encode(e, c) => {
                COUNTERS.inc(match c {
                    Coding::Zstd => Counter::n_zstd,
                    _ => Counter::n_brotli,
                });
                Some(e.finish().map_err(coding_error)?)
            }
            Zip::Test(z) => {
                COUNTERS.inc(Counter::n_test_gunzip);
                let (i, o) = z.counts();
                let scanned = z.finish()?;
                gzip_record(log, 'u', esi_flag, i, o, scanned.bits);
                gzip = Some(scanned);
                None
            }
        };
        let Some(mut body) = self.esi else {
            return Ok(Finished {
                tail,
                program: None,
                gzip,
            });
        };
        if let Some(t) = tail {
            body.extend_from_slice(&t);
        }
        let opts = Options {
            disable_xml_check: p.has(Feature::esi_disable_xml_check),
            remove_bom: p.has(Feature::esi_remove_bom),
            include_onerror: p.has(Feature::esi_include_onerror),
            ignore_https: p.has(Feature::esi_ignore_https),
            ignore_other_elements: p.has(Feature::esi_ignore_other_elements),
        };
        let parsed = esi::parse(&body, base_url, &opts);
        COUNTERS.add(Counter::esi_errors, parsed.errors as u64);
        COUNTERS.add(Counter::esi_warnings, parsed.warnings as u64);
        for note in &parsed.notes {
            log.bytes(Tag::ESI_xmlerror, note.as_bytes());
        }
        let mut program = parsed.program;
        let Some(level) = self.esi_gzip else {
            return Ok(Finished {
                tail: Some(Bytes::from(body)),
                program,
                gzip: None,
            });
        };
        // Compressed in pieces along the program (or whole, when the body
        // was not processed).
        COUNTERS.inc(Counter::n_gzip);
        let mut none = Program::default();
        let (stored, scanned) =
            splice::gzip_page(&body, program.as_mut().unwrap_or(&mut none), level)?;
        let o = stored.len() as u64;
        gzip_record(log, 'G', 'E', body.len() as u64, o, scanned.bits);
        Ok(Finished {
            tail: Some(stored),
            program,
            gzip: Some(scanned),
        })
    }
}

/// A `Gzip` record: operation, fetch, ESI or plain, bytes in and out,
/// then the bit positions of the stored gzip body (deflate start, final
/// block's `BFINAL` bit, end of data) where Lacquer knows them; for a
/// gunzip, the first block's, 0 for the last-block bit, and the end of
/// the compressed data (`compressed` bytes less the 8-byte trailer).
fn gzip_record(log: &mut Txn, op: char, esi: char, input: u64, output: u64, b: GzipBits) {
    if !log.active() {
        return;
    }
    log.fmt(
        Tag::Gzip,
        format_args!(
            "{op} F {esi} {input} {output} {} {} {}",
            b.start, b.last, b.stop
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_filters::gzip;

    fn headers(pairs: &[(&'static str, &'static str)]) -> Headers {
        Headers::from_static_pairs(pairs)
    }

    fn quiet() -> Txn {
        let limits = lacquer_shm::record::Limits {
            reclen: 255,
            buffer: 1024,
            mask: 0,
        };
        Txn::new(None, 1, lacquer_shm::Side::Backend, limits)
    }

    fn filter_whole(f: &mut FetchFilters, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in body.chunks(10) {
            if let Some(b) = f.push(piece).unwrap() {
                out.extend_from_slice(&b);
            }
        }
        out
    }

    /// Untouched bytes are views of what was read only when asked (a
    /// small body that copies what it keeps); otherwise, and for a pass,
    /// a copy that holds nothing of the read buffer.
    #[test]
    fn untouched_pieces_are_views_only_when_asked() {
        let p = Params::default();
        let read = Bytes::from_static(b"head bytes, then the body");
        for views in [true, false] {
            let mut f = FetchFilters::choose(&p, Wanted::default(), &mut headers(&[]), false);
            let pushed = f.push_some_of(&read, 17, views).unwrap();
            assert_eq!(pushed.used, read.len() - 17);
            let piece = pushed.piece.unwrap();
            assert_eq!(piece, &b"the body"[..]);
            let inside = piece.as_ptr() == read[17..].as_ptr();
            assert_eq!(inside, views, "views {views}");
        }
    }

    #[test]
    fn gzip_on_fetch_marks_the_headers() {
        let p = Params::default();
        let mut h = headers(&[("ETag", "\"x\""), ("Vary", "Cookie")]);
        let want = Wanted {
            do_gzip: true,
            ..Wanted::default()
        };
        let mut f = FetchFilters::choose(&p, want, &mut h, false);
        assert!(f.changes_length());
        let mut z = filter_whole(&mut f, b"hello hello hello hello");
        let mut log = quiet();
        let done = f.finish(&p, b"/", &mut log).unwrap();
        z.extend_from_slice(&done.tail.unwrap());
        assert!(done.program.is_none());
        assert_eq!(done.gzip, Some(splice::scan(&z).unwrap()));
        assert_eq!(gzip::gunzip(&z).unwrap(), b"hello hello hello hello");
        assert_eq!(h.get("content-encoding").unwrap().as_ref(), b"gzip");
        assert_eq!(h.get("etag").unwrap().as_ref(), b"W/\"x\"");
        assert_eq!(h.get("vary").unwrap().as_ref(), b"Cookie, Accept-Encoding");
        // Not with gzip support off, nor on an encoded body.
        let off = Params::default();
        off.set("http_gzip_support", "off").unwrap();
        let mut h = headers(&[]);
        assert!(!FetchFilters::choose(&off, want, &mut h, false).changes_length());
        let mut h = headers(&[("Content-Encoding", "br")]);
        assert!(!FetchFilters::choose(&p, want, &mut h, false).changes_length());
    }

    #[test]
    fn esi_gunzips_and_parses() {
        let p = Params::default();
        let page = b"<p><esi:include src=\"/f\"/></p>";
        let z = gzip::gzip(page, 6);
        let mut h = headers(&[("Content-Encoding", "gzip")]);
        let want = Wanted {
            do_esi: true,
            ..Wanted::default()
        };
        let mut f = FetchFilters::choose(&p, want, &mut h, false);
        assert!(f.is_esi());
        assert_eq!(h.get("content-encoding").unwrap().as_ref(), b"gzip");
        assert!(
            filter_whole(&mut f, &z).is_empty(),
            "collected until the end"
        );
        let mut log = quiet();
        let done = f.finish(&p, b"/", &mut log).unwrap();
        let stored = done.tail.unwrap();
        assert_eq!(
            gzip::gunzip(&stored).unwrap(),
            page,
            "gzip'd again, in pieces"
        );
        assert_eq!(done.gzip, Some(splice::scan(&stored).unwrap()));
        let program = done.program.unwrap();
        assert_eq!(program.includes(), 1);
        assert_eq!(program.deflated.len(), 2);

        // With do_gunzip the page is stored plain.
        let mut h = headers(&[("Content-Encoding", "gzip")]);
        let want = Wanted {
            do_esi: true,
            do_gunzip: true,
            ..Wanted::default()
        };
        let mut f = FetchFilters::choose(&p, want, &mut h, false);
        assert!(h.get("content-encoding").is_none());
        filter_whole(&mut f, &z);
        let done = f.finish(&p, b"/", &mut log).unwrap();
        assert_eq!(done.tail.unwrap().as_ref(), page);
        assert!(done.gzip.is_none());
    }

    #[test]
    fn corrupt_gzip_fails_the_test_gunzip() {
        let p = Params::default();
        let mut z = gzip::gzip(b"some text that is long enough", 6);
        let n = z.len();
        z[n - 5] ^= 0x40;
        let mut h = headers(&[("Content-Encoding", "gzip")]);
        let mut f = FetchFilters::choose(&p, Wanted::default(), &mut h, false);
        assert!(!f.changes_length());
        // Stored as it came until the check fails (here at the trailer).
        let mut stored = Vec::new();
        let mut failed = false;
        for piece in z.chunks(10) {
            match f.push(piece) {
                Ok(Some(b)) => stored.extend_from_slice(&b),
                Ok(None) => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(z.starts_with(&stored));
        let mut log = quiet();
        assert!(failed || f.finish(&p, b"/", &mut log).is_err());
    }
}
