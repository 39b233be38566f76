//! What Lacquer reads of a certificate: the host names it is for (its
//! subjectAltName DNS names, or its subject's common name when it has
//! none) and the end of its validity. Read with a small DER walker that
//! follows only the path to those fields; anything malformed gives
//! nothing, never a panic.

/// One DER element: its tag and contents.
struct Tlv<'a> {
    tag: u8,
    body: &'a [u8],
}

/// Reads the element at the front of `b`; returns it and the rest.
fn next(b: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &byte in &rest[..n] {
            len = (len << 8) | usize::from(byte);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((
        Tlv {
            tag,
            body: &rest[..len],
        },
        &rest[len..],
    ))
}

/// The elements of a constructed element's contents.
fn children(mut b: &[u8]) -> Vec<Tlv<'_>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some((t, rest)) = next(b) else { break };
        out.push(t);
        b = rest;
    }
    out
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
/// `[3]` in the TBSCertificate: the extensions.
const EXTENSIONS: u8 = 0xa3;
/// `[2]` in GeneralName: a dNSName.
const DNS_NAME: u8 = 0x82;
/// 2.5.29.17, subjectAltName.
const SAN: &[u8] = &[0x55, 0x1d, 0x11];
/// 2.5.4.3, commonName.
const CN: &[u8] = &[0x55, 0x04, 0x03];

/// The subject's common name of a DER certificate (a client's, say).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (fields, has_version) = tbs_fields(der)?;
    let subject = fields.get(if has_version { 5 } else { 4 })?;
    for rdn in children(subject.body).into_iter().filter(|r| r.tag == SET) {
        for atv in children(rdn.body) {
            let parts = children(atv.body);
            if parts.first().is_some_and(|p| p.tag == OID && p.body == CN) {
                if let Some(Ok(s)) = parts.get(1).map(|v| std::str::from_utf8(v.body)) {
                    return Some(s.to_string());
                }
            }
        }
    }
    None
}

/// The TBSCertificate's fields, and whether the first is the version.
fn tbs_fields(der: &[u8]) -> Option<(Vec<Tlv<'_>>, bool)> {
    let (cert, _) = next(der).filter(|(c, _)| c.tag == SEQUENCE)?;
    let tbs = children(cert.body)
        .into_iter()
        .next()
        .filter(|t| t.tag == SEQUENCE)?;
    let fields = children(tbs.body);
    let has_version = fields.first().is_some_and(|f| f.tag == 0xa0);
    Some((fields, has_version))
}

/// When a DER certificate stops being valid (notAfter), in seconds since
/// the Unix epoch.
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (fields, has_version) = tbs_fields(der)?;
    let validity = fields.get(if has_version { 4 } else { 3 })?;
    let times = children(validity.body);
    let end = times.get(1)?;
    let text = std::str::from_utf8(end.body)
        .ok()
        .filter(|t| t.is_ascii())?;
    // UTCTime YYMMDDHHMMSSZ (years 1950-2049) or GeneralizedTime
    // YYYYMMDDHHMMSSZ.
    let (year, rest) = match end.tag {
        0x17 if text.len() == 13 => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        0x18 if text.len() == 15 => (text.get(..4)?.parse().ok()?, &text[4..]),
        _ => return None,
    };
    if !rest.ends_with('Z') || !rest[..rest.len() - 1].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |i: usize| -> i64 { rest[i..i + 2].parse().unwrap_or(0) };
    let (month, day, hour, min, sec) = (n(0), n(2), n(4), n(6), n(8));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    Some(
        lacquer_core::time::days_from_civil(year, month, day) * 86_400
            + hour * 3600
            + min * 60
            + sec,
    )
}

/// The DNS names of a DER certificate, lower-cased.
pub fn dns_names(der: &[u8]) -> Vec<String> {
    let Some((fields, _)) = tbs_fields(der) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let Some(ext) = fields.iter().find(|t| t.tag == EXTENSIONS) {
        for e in children(next(ext.body).map(|(seq, _)| seq.body).unwrap_or_default()) {
            let parts = children(e.body);
            let is_san = parts.first().is_some_and(|p| p.tag == OID && p.body == SAN);
            let Some(value) = parts.iter().rev().find(|p| p.tag == OCTET_STRING) else {
                continue;
            };
            if !is_san {
                continue;
            }
            if let Some((general_names, _)) = next(value.body) {
                for n in children(general_names.body) {
                    if n.tag == DNS_NAME {
                        if let Ok(s) = std::str::from_utf8(n.body) {
                            names.push(s.to_ascii_lowercase());
                        }
                    }
                }
            }
        }
    }
    if names.is_empty() {
        names.extend(common_name(der).map(|cn| cn.to_ascii_lowercase()));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_san_and_from_cn() {
        let mut params =
            rcgen::CertificateParams::new(vec!["www.example.com".into(), "*.example.org".into()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "ignored.example");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            dns_names(cert.der()),
            vec!["www.example.com", "*.example.org"]
        );

        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Only.CN.example");
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(dns_names(cert.der()), vec!["only.cn.example"]);
    }

    #[test]
    fn the_end_of_validity() {
        let key = rcgen::KeyPair::generate().unwrap();
        let ends = |y, m, d| {
            let mut params = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap();
            params.not_after = rcgen::date_time_ymd(y, m, d);
            not_after(params.self_signed(&key).unwrap().der())
        };
        // UTCTime up to 2049, GeneralizedTime from 2050 on.
        assert_eq!(ends(2042, 2, 28), Some(2_277_158_400));
        assert_eq!(ends(2049, 12, 31), Some(2_524_521_600));
        assert_eq!(ends(2050, 1, 1), Some(2_524_608_000));
        for bad in [&b""[..], b"\x30\x03\x30\x01\x00", &[0x30; 64]] {
            assert_eq!(not_after(bad), None);
        }
    }

    #[test]
    fn garbage_gives_no_names() {
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x84\xff\xff\xff\xff",
            b"\x30\x03\x30\x01\x00",
            &[0x30; 64],
        ] {
            assert!(dns_names(bad).is_empty());
        }
    }
}
