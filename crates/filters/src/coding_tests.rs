use super::*;

const ORDER: [Coding; 3] = [Coding::Zstd, Coding::Br, Coding::Gzip];

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"<p>lacquer caches, varnish caches</p>\n"[i % 38] ^ ((i / 997) as u8 & 1))
        .collect()
}

#[test]
fn negotiation_follows_q_values_then_the_order() {
    let n = |ae: &str| negotiate(Some(ae.as_bytes()), &ORDER);
    assert_eq!(negotiate(None, &ORDER), Coding::Identity);
    assert_eq!(n("gzip, deflate, br, zstd"), Coding::Zstd);
    assert_eq!(n("gzip, deflate, br"), Coding::Br);
    assert_eq!(n("gzip"), Coding::Gzip);
    assert_eq!(n("deflate"), Coding::Identity);
    assert_eq!(n(""), Coding::Identity);
    // q-values rank before the order; q=0 refuses.
    assert_eq!(n("zstd;q=0.5, br;q=0.9, gzip;q=0.1"), Coding::Br);
    assert_eq!(n("zstd;q=0, br;q=0, gzip"), Coding::Gzip);
    assert_eq!(n("ZSTD;Q=0.2, gzip;q=0.2"), Coding::Zstd);
    assert_eq!(n("x-gzip"), Coding::Gzip);
    // A star names what is not named; its q=0 refuses them.
    assert_eq!(n("*"), Coding::Zstd);
    assert_eq!(n("zstd;q=0, *"), Coding::Br);
    assert_eq!(n("gzip, *;q=0"), Coding::Gzip);
    // A q-value that is not one is ignored with its item.
    assert_eq!(n("zstd;q=high, br;q=2, gzip"), Coding::Gzip);
    // The order decides what may be chosen at all.
    assert_eq!(
        negotiate(Some(b"zstd, br, gzip"), &[Coding::Gzip]),
        Coding::Gzip
    );
    assert_eq!(
        negotiate(Some(b"zstd, br"), &[Coding::Gzip]),
        Coding::Identity
    );
}

#[test]
fn orders_and_tokens() {
    assert_eq!(parse_order("zstd,br,gzip").unwrap(), ORDER.to_vec());
    assert_eq!(
        parse_order("br gzip").unwrap(),
        vec![Coding::Br, Coding::Gzip]
    );
    assert_eq!(parse_order("").unwrap(), vec![]);
    assert!(parse_order("br,deflate").unwrap_err().contains("deflate"));
    assert!(parse_order("br,br").is_err());
    assert_eq!(Coding::of_content_encoding(Some(b" BR ")), Some(Coding::Br));
    assert_eq!(Coding::of_content_encoding(None), Some(Coding::Identity));
    assert_eq!(Coding::of_content_encoding(Some(b"gzip, br")), None);
}

#[test]
fn round_trips_in_pieces() {
    let plain = text(300_000);
    for coding in [Coding::Br, Coding::Zstd] {
        let mut e = Encoder::new(coding, 5, None).unwrap();
        let mut z = Vec::new();
        for piece in plain.chunks(4999) {
            z.extend_from_slice(&e.push(piece).unwrap());
        }
        // A flush makes what came so far decodable on its own.
        z.extend_from_slice(&e.flush().unwrap());
        let flushed = z.len();
        z.extend_from_slice(&e.finish().unwrap());
        assert!(z.len() < plain.len() / 10, "{coding:?}: {} bytes", z.len());
        let mut d = Decoder::new(coding).unwrap();
        let mut back = Vec::new();
        for piece in z[..flushed].chunks(333) {
            let mut rest = piece;
            loop {
                let (used, out, more) = d.push_some(rest, 8192).unwrap();
                rest = &rest[used..];
                back.extend_from_slice(&out);
                if rest.is_empty() && !more {
                    break;
                }
            }
        }
        assert_eq!(
            back.len(),
            plain.len(),
            "{coding:?}: the flushed part decodes whole"
        );
        assert_eq!(back, plain);
        assert_eq!(decode(coding, &z, 1 << 20).unwrap(), plain);
        assert_eq!(
            decode(coding, &encode(coding, 3, b"").unwrap(), 10).unwrap(),
            b""
        );
    }
}

#[test]
fn truncated_corrupt_and_trailing_streams_are_errors() {
    let plain = text(50_000);
    for coding in [Coding::Br, Coding::Zstd] {
        let z = encode(coding, 5, &plain).unwrap();
        assert!(
            decode(coding, &z[..z.len() - 3], 1 << 20).is_err(),
            "{coding:?}"
        );
        assert!(decode(coding, b"not compressed at all, no", 1 << 20).is_err());
        let mut extra = z.clone();
        extra.extend_from_slice(b"junk");
        assert!(decode(coding, &extra, 1 << 20).is_err(), "{coding:?}");
        // Flipped bytes anywhere: an error or other bytes, never a panic.
        for at in (0..z.len()).step_by(97) {
            let mut bad = z.clone();
            bad[at] ^= 0x5a;
            let _ = decode(coding, &bad, 1 << 20);
        }
    }
}

#[test]
fn a_bomb_decodes_in_bounded_slices() {
    let zeros = vec![0u8; 64 << 20];
    for coding in [Coding::Br, Coding::Zstd] {
        let z = encode(coding, 3, &zeros).unwrap();
        assert!(z.len() < 64 << 10, "{coding:?}: {} bytes", z.len());
        let mut d = Decoder::new(coding).unwrap();
        let (mut total, mut largest) = (0usize, 0usize);
        let mut rest = &z[..];
        loop {
            let (used, out, more) = d.push_some(rest, 64 * 1024).unwrap();
            rest = &rest[used..];
            total += out.len();
            largest = largest.max(out.len());
            if rest.is_empty() && !more {
                break;
            }
        }
        d.finish().unwrap();
        assert_eq!(total, zeros.len());
        assert!(largest <= 64 * 1024);
        // A whole-buffer decode stops at its limit.
        assert!(decode(coding, &z, 1 << 20).is_err());
    }
}

#[test]
fn a_zstd_window_past_8_mib_is_refused() {
    use zstd::stream::raw::Encoder as Raw;
    use zstd::zstd_safe::CParameter;
    let mut e = Raw::new(3).unwrap();
    e.set_parameter(CParameter::WindowLog(24)).unwrap();
    let plain = text(20 << 20);
    let mut z = Vec::with_capacity(plain.len());
    let mut input = InBuffer::around(&plain);
    let mut output = OutBuffer::around(&mut z);
    e.run(&mut input, &mut output).unwrap();
    while e.finish(&mut output, true).unwrap() > 0 {}
    let err = decode(Coding::Zstd, &z, usize::MAX).unwrap_err();
    assert!(err.0.contains("zstd"), "{err}");
}
