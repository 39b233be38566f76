//! Content codings beyond gzip: the choice of one coding per request from
//! its `Accept-Encoding` (q-values honoured, the server's order breaking
//! ties), and brotli and zstd as streaming steps. An encoder takes bytes
//! and hands back what is ready; a decoder hands back at most a slice at
//! a time however far its input expands, with its window bounded (zstd's
//! to 8 MiB as RFC 9659 asks of HTTP, brotli's to the 16 MiB its format
//! allows), so a bomb costs a stream's slice and window, never its size.
//! Corrupt or truncated input is an error, never a panic.

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use brotlic::{BrotliEncoderOptions, Quality, WindowSize};
use bytes::Bytes;
use std::io::Write;
use zstd::stream::raw::{Decoder as ZstdRaw, InBuffer, Operation, OutBuffer};
use zstd::zstd_safe::DParameter;

/// A content coding Lacquer can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Identity,
    Gzip,
    Br,
    Zstd,
}

/// The largest zstd window a decoder accepts: 8 MiB, as RFC 9659 limits
/// the `zstd` coding in HTTP (2^23 bytes).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// The highest zstd level an encoder uses: past it the window grows
/// beyond what HTTP's decoders must accept.
pub const ZSTD_LEVEL_MAX: i32 = 19;

/// The brotli window an encoder uses (4 MiB, the reference encoder's
/// default).
const BROTLI_LGWIN: u8 = 22;

impl Coding {
    /// Its token, as `Accept-Encoding` and `Content-Encoding` spell it.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding a token names (case-insensitive; `x-gzip` is gzip).
    pub fn from_token(token: &[u8]) -> Option<Coding> {
        let t = token.trim_ascii();
        [
            (&b"identity"[..], Coding::Identity),
            (b"gzip", Coding::Gzip),
            (b"x-gzip", Coding::Gzip),
            (b"br", Coding::Br),
            (b"zstd", Coding::Zstd),
        ]
        .iter()
        .find(|(name, _)| t.eq_ignore_ascii_case(name))
        .map(|&(_, c)| c)
    }

    /// The coding of a body whose `Content-Encoding` is `value` (absent:
    /// identity); None for anything else (several codings, or one Lacquer
    /// does not know), which is passed on untouched.
    pub fn of_content_encoding(value: Option<&[u8]>) -> Option<Coding> {
        match value {
            None => Some(Coding::Identity),
            Some(v) if v.trim_ascii().is_empty() => Some(Coding::Identity),
            Some(v) => Coding::from_token(v),
        }
    }

    /// Whether it is one of the codings Lacquer makes renditions in.
    pub fn is_rendition(self) -> bool {
        matches!(self, Coding::Br | Coding::Zstd)
    }
}

/// Reads an order of codings (`zstd,br,gzip`), most preferred first; an
/// unknown or repeated name is an error naming it.
pub fn parse_order(list: &str) -> Result<Vec<Coding>, String> {
    let mut order = Vec::new();
    for name in list
        .split([',', ' '])
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let c = Coding::from_token(name.as_bytes())
            .ok_or_else(|| format!("unknown content coding '{name}'"))?;
        if c == Coding::Identity || order.contains(&c) {
            return Err(format!("'{name}' cannot be listed here"));
        }
        order.push(c);
    }
    Ok(order)
}

/// The q-value of an `Accept-Encoding` item's parameters (1 when none);
/// None when it is not a number.
fn q_value<'a>(params: impl Iterator<Item = &'a [u8]>) -> Option<f64> {
    for p in params {
        let p = p.trim_ascii();
        if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") {
            return std::str::from_utf8(&p[2..])
                .ok()
                .and_then(|q| q.trim().parse::<f64>().ok())
                .filter(|q| (0.0..=1.0).contains(q));
        }
    }
    Some(1.0)
}

/// What an `Accept-Encoding` field gives each coding Lacquer knows: its
/// q-value where named, and the q-value of `*` for the others.
#[derive(Debug, Clone, Copy, Default)]
pub struct Accepts {
    named: [Option<f64>; 4],
    star: Option<f64>,
}

impl Accepts {
    /// Reads a field (absent: nothing accepted but identity).
    pub fn parse(field: Option<&[u8]>) -> Accepts {
        let mut a = Accepts::default();
        for item in field.unwrap_or_default().split(|&b| b == b',') {
            let mut parts = item.split(|&b| b == b';');
            let token = parts.next().unwrap_or_default().trim_ascii();
            if token.is_empty() {
                continue;
            }
            let Some(q) = q_value(parts) else { continue };
            if token == b"*" {
                a.star = Some(a.star.map_or(q, |s: f64| s.max(q)));
            } else if let Some(c) = Coding::from_token(token) {
                let slot = &mut a.named[c as usize];
                *slot = Some(slot.map_or(q, |s| s.max(q)));
            }
        }
        a
    }

    /// The q-value the field gives `c` (0: refused or not named).
    pub fn q(&self, c: Coding) -> f64 {
        self.named[c as usize].or(self.star).unwrap_or(0.0)
    }

    /// Whether the field accepts `c`.
    pub fn takes(&self, c: Coding) -> bool {
        self.q(c) > 0.0
    }

    /// Of the codings in `order` the field accepts, the one with the
    /// highest q-value, the earlier in `order` on a tie; identity when
    /// it accepts none.
    pub fn best(&self, order: &[Coding]) -> Coding {
        let mut best = (Coding::Identity, 0.0);
        for &c in order {
            let q = self.q(c);
            if q > best.1 {
                best = (c, q);
            }
        }
        best.0
    }
}

/// The coding a client gets: of those in `order` that its
/// `Accept-Encoding` accepts (a q-value above zero, named or by `*`), the
/// one with the highest q-value, the earlier in `order` on a tie;
/// identity when it accepts none (or sent no field).
pub fn negotiate(accept_encoding: Option<&[u8]>, order: &[Coding]) -> Coding {
    Accepts::parse(accept_encoding).best(order)
}

/// Why a brotli or zstd stream could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodingError(pub String);

impl std::fmt::Display for CodingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodingError {}

fn io_error(what: &str, e: std::io::Error) -> CodingError {
    CodingError(format!("{what}: {e}"))
}

/// A streaming brotli or zstd compressor.
pub enum Encoder {
    Br(Box<brotlic::CompressorWriter<Vec<u8>>>),
    Zstd(Box<zstd::stream::write::Encoder<'static, Vec<u8>>>),
}

impl Encoder {
    /// A compressor for `coding` at `level` (brotli 0–11, zstd 1–19;
    /// clamped), told the input's length when it is known (`size`), as
    /// the reference tools are when they compress a file.
    pub fn new(coding: Coding, level: i32, size: Option<u64>) -> Result<Encoder, CodingError> {
        match coding {
            Coding::Br => {
                let quality = Quality::new(level.clamp(0, 11) as u8)
                    .map_err(|e| CodingError(format!("brotli: {e}")))?;
                let window = WindowSize::new(BROTLI_LGWIN)
                    .map_err(|e| CodingError(format!("brotli: {e}")))?;
                let mut options = BrotliEncoderOptions::new();
                options.quality(quality).window_size(window);
                if let Some(n) = size {
                    options.size_hint(n.min(u64::from(u32::MAX)) as u32);
                }
                let encoder = options
                    .build()
                    .map_err(|e| CodingError(format!("brotli: {e}")))?;
                Ok(Encoder::Br(Box::new(
                    brotlic::CompressorWriter::with_encoder(encoder, Vec::new()),
                )))
            }
            Coding::Zstd => {
                let mut z =
                    zstd::stream::write::Encoder::new(Vec::new(), level.clamp(1, ZSTD_LEVEL_MAX))
                        .map_err(|e| io_error("zstd", e))?;
                z.include_checksum(true).map_err(|e| io_error("zstd", e))?;
                if let Some(n) = size {
                    z.set_pledged_src_size(Some(n))
                        .map_err(|e| io_error("zstd", e))?;
                }
                Ok(Encoder::Zstd(Box::new(z)))
            }
            other => Err(CodingError(format!(
                "no streaming encoder for {}",
                other.token()
            ))),
        }
    }

    fn output(&mut self) -> &mut Vec<u8> {
        match self {
            Encoder::Br(w) => w.get_mut(),
            Encoder::Zstd(w) => w.get_mut(),
        }
    }

    /// Feeds bytes; returns whatever compressed output is ready (often
    /// nothing: the compressor keeps a window).
    pub fn push(&mut self, data: &[u8]) -> Result<Bytes, CodingError> {
        let r = match self {
            Encoder::Br(w) => w.write_all(data),
            Encoder::Zstd(w) => w.write_all(data),
        };
        r.map_err(|e| io_error("compress", e))?;
        Ok(Bytes::from(std::mem::take(self.output())))
    }

    /// Flushes what was fed so far to whole bytes, so a client can
    /// decode it before the stream ends.
    pub fn flush(&mut self) -> Result<Bytes, CodingError> {
        let r = match self {
            Encoder::Br(w) => w.flush(),
            Encoder::Zstd(w) => w.flush(),
        };
        r.map_err(|e| io_error("compress", e))?;
        Ok(Bytes::from(std::mem::take(self.output())))
    }

    /// Ends the stream; returns the rest of the output.
    pub fn finish(self) -> Result<Bytes, CodingError> {
        match self {
            Encoder::Br(w) => w
                .into_inner()
                .map(Bytes::from)
                .map_err(|_| CodingError("brotli: the stream did not end".into())),
            Encoder::Zstd(w) => w.finish().map(Bytes::from).map_err(|e| io_error("zstd", e)),
        }
    }
}

type BrotliDecoderState = BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>;

/// A streaming brotli or zstd decompressor that hands back bounded
/// slices.
pub enum Decoder {
    Br {
        state: Box<BrotliDecoderState>,
        /// Bytes made so far: the decoder reads it back.
        total: usize,
        done: bool,
    },
    Zstd {
        z: Box<ZstdRaw<'static>>,
        /// The last call may have left output in the decoder.
        pending: bool,
        /// The input ended a frame last (a stream may hold several).
        at_frame_end: bool,
    },
}

impl Decoder {
    /// A decompressor for `coding` (brotli or zstd).
    pub fn new(coding: Coding) -> Result<Decoder, CodingError> {
        match coding {
            Coding::Br => Ok(Decoder::Br {
                state: Box::new(BrotliState::new(
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                )),
                total: 0,
                done: false,
            }),
            Coding::Zstd => {
                let mut z = ZstdRaw::new().map_err(|e| io_error("zstd", e))?;
                z.set_parameter(DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                    .map_err(|e| io_error("zstd", e))?;
                Ok(Decoder::Zstd {
                    z: Box::new(z),
                    pending: false,
                    at_frame_end: true,
                })
            }
            other => Err(CodingError(format!(
                "no streaming decoder for {}",
                other.token()
            ))),
        }
    }

    /// Feeds compressed bytes from the front of `data` until about
    /// `limit` bytes come out; returns the bytes taken, the ones made, and
    /// whether the decoder may hold more (call again, with the rest or
    /// nothing, before it is finished).
    pub fn push_some(
        &mut self,
        data: &[u8],
        limit: usize,
    ) -> Result<(usize, Bytes, bool), CodingError> {
        let limit = limit.max(1);
        let mut out = vec![0u8; limit];
        match self {
            Decoder::Br { state, total, done } => {
                if *done {
                    if data.is_empty() {
                        return Ok((0, Bytes::new(), false));
                    }
                    return Err(CodingError(
                        "brotli: data after the end of the stream".into(),
                    ));
                }
                let (mut avail_in, mut in_off) = (data.len(), 0usize);
                let (mut avail_out, mut out_off) = (limit, 0usize);
                let r = BrotliDecompressStream(
                    &mut avail_in,
                    &mut in_off,
                    data,
                    &mut avail_out,
                    &mut out_off,
                    &mut out,
                    total,
                    state,
                );
                out.truncate(out_off);
                let more = match r {
                    BrotliResult::ResultFailure => {
                        return Err(CodingError("brotli: corrupt stream".into()))
                    }
                    BrotliResult::ResultSuccess => {
                        *done = true;
                        if in_off < data.len() {
                            return Err(CodingError(
                                "brotli: data after the end of the stream".into(),
                            ));
                        }
                        false
                    }
                    BrotliResult::NeedsMoreOutput => true,
                    // It may say so with its output full and more to give.
                    BrotliResult::NeedsMoreInput => out_off == limit,
                };
                Ok((in_off, Bytes::from(out), more))
            }
            Decoder::Zstd {
                z,
                pending,
                at_frame_end,
            } => {
                out.clear();
                let mut input = InBuffer::around(data);
                let mut output = OutBuffer::around(&mut out);
                let hint = z
                    .run(&mut input, &mut output)
                    .map_err(|e| io_error("zstd", e))?;
                let made = output.pos();
                let used = input.pos();
                // A call that took and made nothing says nothing of where
                // the stream stands (its hint is for a next frame).
                if used > 0 || made > 0 {
                    *at_frame_end = hint == 0;
                }
                *pending = made == limit;
                Ok((used, Bytes::from(out), *pending))
            }
        }
    }

    /// Ends the stream: fails if it was cut short.
    pub fn finish(self) -> Result<(), CodingError> {
        match self {
            Decoder::Br { done: true, .. } => Ok(()),
            Decoder::Br { .. } => Err(CodingError("brotli: stream cut short".into())),
            Decoder::Zstd {
                pending: false,
                at_frame_end: true,
                ..
            } => Ok(()),
            Decoder::Zstd { .. } => Err(CodingError("zstd: stream cut short".into())),
        }
    }
}

/// Compresses a whole buffer.
pub fn encode(coding: Coding, level: i32, data: &[u8]) -> Result<Vec<u8>, CodingError> {
    let mut e = Encoder::new(coding, level, Some(data.len() as u64))?;
    let mut out = e.push(data)?.to_vec();
    out.extend_from_slice(&e.finish()?);
    Ok(out)
}

/// Decompresses a whole buffer, refusing to make more than `max` bytes.
pub fn decode(coding: Coding, data: &[u8], max: usize) -> Result<Vec<u8>, CodingError> {
    let mut d = Decoder::new(coding)?;
    let mut out = Vec::new();
    let mut rest = data;
    loop {
        let (used, piece, more) = d.push_some(rest, 64 * 1024)?;
        rest = &rest[used..];
        out.extend_from_slice(&piece);
        if out.len() > max {
            return Err(CodingError(format!("more than {max} bytes")));
        }
        if !more && (rest.is_empty() || (used == 0 && piece.is_empty())) {
            break;
        }
    }
    if !rest.is_empty() {
        return Err(CodingError("data after the end of the stream".into()));
    }
    d.finish()?;
    Ok(out)
}

#[cfg(test)]
#[path = "coding_tests.rs"]
mod tests;
