//! The delivery filters of a response, as `resp.filters` names them
//! (`esi gunzip range`): those VCL set, else the ones the object and the
//! request call for. Delivery runs them; VCL reads and sets them.

use crate::host::req::{can_gzip, Req};
use lacquer_cache::object::Object;
use lacquer_core::params::Params;

/// The delivery filters of a response (`resp.filters`), in the order
/// they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filters {
    /// Run the object's ESI program.
    pub esi: bool,
    /// Inflate a gzip'd body.
    pub gunzip: bool,
    /// Answer the request's byte range.
    pub range: bool,
}

impl Filters {
    const ESI: u8 = 1;
    const GUNZIP: u8 = 2;
    const RANGE: u8 = 4;

    /// The filters a response gets: those VCL set, else the ones the
    /// object and the request call for.
    pub fn of(p: &Params, req: &Req, obj: &Object, status: u16) -> Filters {
        match req.resp_filters {
            Some(bits) => Filters {
                esi: bits & Self::ESI != 0 && obj.esi_expected(),
                gunzip: bits & Self::GUNZIP != 0 && obj.gzipped(),
                range: bits & Self::RANGE != 0,
            },
            None => {
                let mut f = Self::for_delivery(p, req, obj, status);
                f.range = f.range || Self::asks_range(p, req, status);
                f
            }
        }
    }

    /// [`Filters::of`] as delivery needs them: `range` is only asked
    /// about for a body that is transformed (delivery answers ranges of a
    /// stored body itself), so a plain hit does not look for the header
    /// twice.
    pub fn for_delivery(p: &Params, req: &Req, obj: &Object, status: u16) -> Filters {
        if req.resp_filters.is_some() {
            return Self::of(p, req, obj, status);
        }
        let esi = obj.esi_expected() && req.esi_enabled;
        let gunzip = p.http_gzip_support() && obj.gzipped() && !can_gzip(&req.head.headers);
        Filters {
            esi,
            gunzip,
            range: (esi || gunzip) && Self::asks_range(p, req, status),
        }
    }

    fn asks_range(p: &Params, req: &Req, status: u16) -> bool {
        status == 200 && p.http_range_support() && req.head.headers.get("range").is_some()
    }

    /// The list as VCL reads it: `esi gunzip range`.
    pub fn names(self) -> String {
        let names = [
            (self.esi, "esi"),
            (self.gunzip, "gunzip"),
            (self.range, "range"),
        ];
        let on: Vec<&str> = names.iter().filter(|n| n.0).map(|n| n.1).collect();
        on.join(" ")
    }

    /// Writes the `Filters` record of a delivery: the filters that run,
    /// each after a space as varnishd writes them (` esi gunzip range`).
    pub fn log(log: &mut lacquer_shm::Txn, esi: bool, gunzip: bool, range: bool) {
        if !log.wants(lacquer_shm::Tag::Filters) {
            return;
        }
        let mut list = String::new();
        for (on, name) in [(esi, " esi"), (gunzip, " gunzip"), (range, " range")] {
            if on {
                list.push_str(name);
            }
        }
        log.bytes(lacquer_shm::Tag::Filters, list.as_bytes());
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
