//! The delivery filters of a response, as `resp.filters` names them
//! (`esi gunzip unbr unzstd br zstd range`): those VCL set, else the ones
//! the object and the request call for. Delivery runs them; VCL reads and sets them.

use crate::host::coding as encodings;
use crate::host::req::{can_gzip, Req};
use lacquer_cache::object::Object;
use lacquer_core::params::Params;
use lacquer_filters::coding::Coding;

/// The delivery filters of a response (`resp.filters`), in the order
/// they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filters {
    /// Run the object's ESI program.
    pub esi: bool,
    /// Inflate a gzip'd body.
    pub gunzip: bool,
    /// Decode a body stored br or zstd (`unbr`, `unzstd`).
    pub decode: Option<Coding>,
    /// Send it br or zstd (`br`, `zstd`): the object's rendition in that
    /// coding when it has one, else compressed on the way out.
    pub encode: Option<Coding>,
    /// Answer the request's byte range.
    pub range: bool,
}

impl Filters {
    const ESI: u8 = 1;
    const GUNZIP: u8 = 2;
    const RANGE: u8 = 4;
    const BR: u8 = 8;
    const ZSTD: u8 = 16;
    const UNBR: u8 = 32;
    const UNZSTD: u8 = 64;

    /// The filters a response gets: those VCL set, else the ones the
    /// object and the request call for.
    pub fn of(p: &Params, req: &Req, obj: &Object, status: u16) -> Filters {
        match req.resp_filters {
            Some(bits) => {
                let stored = encodings::stored(obj);
                let decode = match stored {
                    Some(Coding::Br) if bits & Self::UNBR != 0 => Some(Coding::Br),
                    Some(Coding::Zstd) if bits & Self::UNZSTD != 0 => Some(Coding::Zstd),
                    _ => None,
                };
                let gunzip = bits & Self::GUNZIP != 0 && obj.gzipped();
                let encode = [(Self::BR, Coding::Br), (Self::ZSTD, Coding::Zstd)]
                    .into_iter()
                    .find(|&(bit, _)| bits & bit != 0)
                    .map(|(_, c)| c)
                    .filter(|&c| stored != Some(c) || decode.is_some());
                Filters {
                    esi: bits & Self::ESI != 0 && obj.esi_expected(),
                    // What is compressed on the way out is inflated first.
                    gunzip: gunzip || (encode.is_some() && obj.gzipped()),
                    decode: decode.or(encode.and(stored.filter(|c| c.is_rendition()))),
                    encode,
                    range: bits & Self::RANGE != 0 && encode.is_none(),
                }
            }
            None => {
                let mut f = Self::for_delivery(p, req, obj, status);
                f.range = f.range || (f.encode.is_none() && Self::asks_range(p, req, status));
                f
            }
        }
    }

    /// [`Filters::of`] as delivery needs them: `range` is only asked
    /// about for a body that is transformed (delivery answers ranges of a
    /// stored body itself), so a plain hit does not look for the header
    /// twice. A client that gets br or zstd has `encode` when the object
    /// has that rendition, or is an ESI page (compressed as it goes out).
    pub fn for_delivery(p: &Params, req: &Req, obj: &Object, status: u16) -> Filters {
        if req.resp_filters.is_some() {
            return Self::of(p, req, obj, status);
        }
        let esi = obj.esi_expected() && req.esi_enabled;
        let support = p.http_gzip_support();
        let mut gunzip = support && obj.gzipped() && !can_gzip(&req.head.headers);
        let mut decode = None;
        let mut encode = None;
        if support && obj.other_coding() {
            decode =
                encodings::stored(obj).filter(|&c| c.is_rendition() && !encodings::takes(req, c));
        } else if let Some(c) = encodings::wanted(p, req, obj, status) {
            if obj.rendition(encodings::slot(c)).is_some() {
                (encode, gunzip) = (Some(c), false);
            }
        } else if esi && support && req.coding.is_rendition() && !obj.other_coding() {
            (encode, gunzip) = (Some(req.coding), obj.gzipped());
        }
        let transformed = esi || gunzip || decode.is_some();
        Filters {
            esi,
            gunzip,
            decode,
            encode,
            range: transformed && encode.is_none() && Self::asks_range(p, req, status),
        }
    }

    fn asks_range(p: &Params, req: &Req, status: u16) -> bool {
        status == 200 && p.http_range_support() && req.head.headers.get("range").is_some()
    }

    /// The filters that run, by name, in order.
    fn each(self) -> impl Iterator<Item = &'static str> {
        let decode = self.decode.map(|c| match c {
            Coding::Zstd => "unzstd",
            _ => "unbr",
        });
        [
            self.esi.then_some("esi"),
            self.gunzip.then_some("gunzip"),
            decode,
            self.encode.map(Coding::token),
            self.range.then_some("range"),
        ]
        .into_iter()
        .flatten()
    }

    /// The list as VCL reads it: `esi gunzip range`.
    pub fn names(self) -> String {
        self.each().collect::<Vec<_>>().join(" ")
    }

    /// Writes the `Filters` record of a delivery: the filters that run,
    /// each after a space as varnishd writes them (` esi gunzip range`).
    pub fn log(self, log: &mut lacquer_shm::Txn) {
        if !log.wants(lacquer_shm::Tag::Filters) {
            return;
        }
        let mut list = String::new();
        for name in self.each() {
            list.push(' ');
            list.push_str(name);
        }
        log.bytes(lacquer_shm::Tag::Filters, list.as_bytes());
    }

    /// Only these, of a response that is not transformed otherwise.
    pub fn only(esi: bool, gunzip: bool, range: bool) -> Filters {
        Filters {
            esi,
            gunzip,
            decode: None,
            encode: None,
            range,
        }
    }

    /// Reads a list VCL set; an unknown filter is an error naming it.
    pub fn parse(list: &[u8]) -> Result<u8, String> {
        let mut bits = 0;
        for name in list
            .split(|b| b.is_ascii_whitespace())
            .filter(|n| !n.is_empty())
        {
            bits |= match name {
                b"esi" => Self::ESI,
                b"gunzip" => Self::GUNZIP,
                b"range" => Self::RANGE,
                b"br" => Self::BR,
                b"zstd" => Self::ZSTD,
                b"unbr" => Self::UNBR,
                b"unzstd" => Self::UNZSTD,
                other => {
                    return Err(format!(
                        "Filter '{}' not found",
                        String::from_utf8_lossy(other)
                    ))
                }
            };
        }
        Ok(bits)
    }
}
