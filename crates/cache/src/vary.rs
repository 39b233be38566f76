//! What a `Vary` response asks of the requests it may answer: the values
//! the request that fetched it had for the header fields it names.

use bytes::Bytes;
use lacquer_http::Headers;

/// A `Vary` that names `*`: the response matches no future request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VaryStar;

/// The values of the request headers a `Vary` response names, as they were
/// on the request that fetched it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarySpec {
    fields: Vec<(String, Option<Bytes>)>,
}

impl VarySpec {
    /// Builds the spec from a `Vary` value list and the request headers.
    /// Returns `Err(VaryStar)` for `Vary: *` (anywhere in the list) and
    /// for a malformed list.
    pub fn build<'a>(
        vary_values: impl Iterator<Item = &'a Bytes>,
        req: &Headers,
    ) -> Result<Option<VarySpec>, VaryStar> {
        Self::build_skipping(vary_values, req, false)
    }

    /// Like [`VarySpec::build`]; with `skip_accept_encoding` (the cache
    /// stores gzip and inflates for whoever needs it, as Varnish does
    /// with `http_gzip_support`) every client matches whatever its
    /// `Accept-Encoding`.
    pub fn build_skipping<'a>(
        vary_values: impl Iterator<Item = &'a Bytes>,
        req: &Headers,
        skip_accept_encoding: bool,
    ) -> Result<Option<VarySpec>, VaryStar> {
        let mut fields: Vec<(String, Option<Bytes>)> = Vec::new();
        for value in vary_values {
            for token in value.split(|&b| b == b',') {
                let token = lacquer_http::headers::trim(token);
                if token.is_empty() {
                    continue;
                }
                // `*`, and (as in Varnish) a name that is no field name
                // or is longer than 127 bytes: no variant can be told
                // apart by it, so nothing is shared.
                if token == b"*"
                    || token.len() > 127
                    || !token
                        .iter()
                        .all(|&b| lacquer_http::headers::is_token_byte(b))
                {
                    return Err(VaryStar);
                }
                let name = String::from_utf8_lossy(token).to_ascii_lowercase();
                if skip_accept_encoding && name == "accept-encoding" {
                    continue;
                }
                if fields.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                // Copied, so the variant does not pin the request's buffer.
                let v = req.get(&name).map(|v| Bytes::copy_from_slice(v));
                fields.push((name, v));
            }
        }
        Ok(if fields.is_empty() {
            None
        } else {
            Some(VarySpec { fields })
        })
    }

    /// The variant another request would select: these field names with
    /// its values (Varnish's predictive vary, for a fetch under way).
    pub fn predict(&self, req: &Headers) -> VarySpec {
        VarySpec {
            fields: self
                .fields
                .iter()
                .map(|(name, _)| {
                    (
                        name.clone(),
                        req.get(name).map(|v| Bytes::copy_from_slice(v)),
                    )
                })
                .collect(),
        }
    }

    /// The field names and the values they had, as stored.
    pub fn fields(&self) -> &[(String, Option<Bytes>)] {
        &self.fields
    }

    /// A spec read back from storage.
    pub fn from_fields(fields: Vec<(String, Option<Bytes>)>) -> Option<VarySpec> {
        (!fields.is_empty()).then_some(VarySpec { fields })
    }

    /// Whether a request selects this variant.
    pub fn matches(&self, req: &Headers) -> bool {
        self.fields
            .iter()
            .all(|(name, value)| match (req.get(name), value) {
                (None, None) => true,
                (Some(a), Some(b)) => a == b,
                _ => false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_specs() {
        let mut req = Headers::new();
        req.append("Accept-Encoding", "gzip");
        let vary = [Bytes::from_static(b"Accept-Encoding, X-Absent")];
        let spec = VarySpec::build(vary.iter(), &req).unwrap().unwrap();
        assert!(spec.matches(&req));
        let mut other = Headers::new();
        other.append("accept-encoding", "br");
        assert!(!spec.matches(&other));
        let mut extra = req.clone();
        extra.append("X-Absent", "1");
        assert!(!spec.matches(&extra));
        let star = [Bytes::from_static(b"Cookie, *")];
        assert!(VarySpec::build(star.iter(), &req).is_err());
        let colon = [Bytes::from_static(b": foo")];
        assert!(VarySpec::build(colon.iter(), &req).is_err(), "malformed");
        let long = [Bytes::from("a".repeat(128))];
        assert!(VarySpec::build(long.iter(), &req).is_err(), "too long");
        let fine = [Bytes::from("a".repeat(127))];
        assert!(VarySpec::build(fine.iter(), &req).is_ok());
        let ae = [Bytes::from_static(b"Accept-Encoding")];
        assert!(VarySpec::build_skipping(ae.iter(), &req, true)
            .unwrap()
            .is_none());
        assert!(VarySpec::build_skipping(ae.iter(), &req, false)
            .unwrap()
            .is_some());
        let empty = [Bytes::from_static(b" ")];
        assert!(VarySpec::build(empty.iter(), &req).unwrap().is_none());
    }
}
