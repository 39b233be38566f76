//! The content coding a request is served in: chosen once, where Varnish
//! washes `Accept-Encoding` for the lookup (after `vcl_recv`, from the
//! field as VCL left it), by `http_encodings` and the client's q-values;
//! the codings the client takes; the coding a stored body has; and
//! whether an object may be sent in the client's coding as a rendition
//! (made by `client::encodings`).

use crate::host::head_edits::{remove_header_line, vary_accept_encoding_line, weaken_etag_line};
use crate::host::req::Req;
use lacquer_cache::object::{ObjKind, Object};
use lacquer_core::params::Params;
use lacquer_filters::coding::{Accepts, Coding};

/// The bit [`accepted`] gives a coding.
pub(crate) fn bit(c: Coding) -> u8 {
    match c {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Br => 2,
        Coding::Zstd => 4,
    }
}

/// In [`Req::accepted`]: the coding was chosen (once a request).
const CHOSEN: u8 = 0x80;

/// The codings an `Accept-Encoding` field accepts, as bits ([`bit`]).
pub(crate) fn accepted(a: &Accepts) -> u8 {
    [Coding::Gzip, Coding::Br, Coding::Zstd]
        .iter()
        .filter(|&&c| a.takes(c))
        .fold(0, |bits, &c| bits | bit(c))
}

/// `http_encodings`, most preferred first: the codings and how many
/// (on the stack: this runs for every request that looks up).
pub(crate) fn order(p: &Params) -> ([Coding; 3], usize) {
    let packed = p.encoding_order();
    let mut out = [Coding::Identity; 3];
    let mut n = 0;
    for i in 0..3 {
        let c = match (packed >> (4 * i)) & 15 {
            1 => Coding::Gzip,
            2 => Coding::Br,
            3 => Coding::Zstd,
            _ => break,
        };
        out[n] = c;
        n += 1;
    }
    (out, n)
}

/// Chooses the request's coding from its `Accept-Encoding` (before it is
/// washed to gzip): once a request, so a restart keeps the client's
/// choice rather than the washed field's.
pub(crate) fn choose(p: &Params, req: &mut Req) {
    if req.accepted & CHOSEN != 0 {
        return;
    }
    let a = Accepts::parse(req.head.headers.get("accept-encoding").map(|f| &f[..]));
    let (order, n) = order(p);
    req.coding = a.best(&order[..n]);
    req.accepted = accepted(&a) | CHOSEN;
}

/// Whether the client takes `c` (as its `Accept-Encoding` said when its
/// coding was chosen). A request whose coding was not chosen (a pass:
/// its own field went to the backend) takes what the backend sent.
pub(crate) fn takes(req: &Req, c: Coding) -> bool {
    req.accepted & CHOSEN == 0 || req.accepted & bit(c) != 0
}

/// The rendition slot of a coding.
pub(crate) fn slot(c: Coding) -> usize {
    match c {
        Coding::Zstd => 1,
        _ => 0,
    }
}

/// The coding a stored body has, read from its head when it is not
/// gzip or identity (None: a coding Lacquer does not know, or several).
pub(crate) fn stored(obj: &Object) -> Option<Coding> {
    if obj.gzipped() {
        Some(Coding::Gzip)
    } else if obj.other_coding() {
        Coding::of_content_encoding(obj.header("content-encoding").as_deref())
    } else {
        Some(Coding::Identity)
    }
}

/// The coding a rendition would be made in for this request and object:
/// the client's, when it is br or zstd and the object may have one.
#[inline]
pub(crate) fn wanted(p: &Params, req: &Req, obj: &Object, status: u16) -> Option<Coding> {
    let c = req.coding;
    let may = c.is_rendition()
        && status == 200
        && p.http_gzip_support()
        && !obj.no_rendition()
        && !obj.other_coding()
        && !obj.esi_expected()
        && obj.kind() == ObjKind::Normal;
    may.then_some(c)
}

/// What a fetch does with br and zstd, given what VCL asked and the
/// body's coding (`coded`, from `Content-Encoding`): a br or zstd body
/// is decoded for an ESI parse or when VCL named its `un` filter (else
/// stored as it came); a plain body is compressed when VCL named br or
/// zstd (not for an ESI page, which is parsed as text).
pub(crate) fn recoding(
    do_esi: bool,
    encode: Option<Coding>,
    decode: Option<Coding>,
    coded: Option<Coding>,
    plain: bool,
) -> (Option<Coding>, Option<Coding>) {
    let decode = coded.filter(|&c| c.is_rendition() && (do_esi || decode == Some(c)));
    let encode = encode.filter(|_| plain && !do_esi);
    (decode, encode)
}

/// Makes a stored head the head of the same body in coding `c`: its
/// `Content-Encoding` replaced (removed for identity), its stored length
/// gone (delivery writes the length of what it sends), its `ETag` weak,
/// and `Accept-Encoding` in its `Vary`.
pub(crate) fn recode_head(head: &mut Vec<u8>, c: Coding) {
    remove_header_line(head, b"content-encoding");
    remove_header_line(head, b"content-length");
    weaken_etag_line(head);
    if c != Coding::Identity {
        head.extend_from_slice(b"Content-Encoding: ");
        head.extend_from_slice(c.token().as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    vary_accept_encoding_line(head);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_codings_and_heads() {
        let of = |f: Option<&[u8]>| accepted(&Accepts::parse(f));
        assert_eq!(of(Some(b"gzip, br")), bit(Coding::Gzip) | bit(Coding::Br));
        assert_eq!(of(Some(b"zstd;q=0, *")), 3);
        assert_eq!(of(None), 0);
        let mut head =
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nETag: \"a\"\r\nVary: Cookie\r\n"
                .to_vec();
        recode_head(&mut head, Coding::Br);
        assert_eq!(
            head,
            b"HTTP/1.1 200 OK\r\nETag: W/\"a\"\r\nVary: Cookie\r\nContent-Encoding: br\r\nVary: Accept-Encoding\r\n"
        );
        let mut head = b"HTTP/1.1 200 OK\r\nvary: accept-encoding\r\n".to_vec();
        recode_head(&mut head, Coding::Zstd);
        assert_eq!(
            head,
            b"HTTP/1.1 200 OK\r\nvary: accept-encoding\r\nContent-Encoding: zstd\r\n"
        );
    }

    #[test]
    fn the_order_reads_back() {
        let p = Params::default();
        let of = |p: &Params| {
            let (o, n) = order(p);
            o[..n].to_vec()
        };
        assert_eq!(of(&p), vec![Coding::Zstd, Coding::Br, Coding::Gzip]);
        p.set("http_encodings", "gzip").unwrap();
        assert_eq!(of(&p), vec![Coding::Gzip]);
        p.set("http_encodings", "br, gzip").unwrap();
        assert_eq!(of(&p), vec![Coding::Br, Coding::Gzip]);
        p.set("http_encodings", "").unwrap();
        assert_eq!(of(&p), vec![]);
        assert!(p.set("http_encodings", "br, deflate").is_err());
        assert!(p.set("http_encodings", "br,br").is_err());
    }
}
