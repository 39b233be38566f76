//! The chunked decoder, fed in two pieces split anywhere: never a panic,
//! never more data out than went in, the same result however split.
#![no_main]
#![forbid(unsafe_code)]
use bytes::BytesMut;
use lacquer_http::chunked::{ChunkedDecoder, Decoded};
use libfuzzer_sys::fuzz_target;

fn decode(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool), ()> {
    let mut dec = ChunkedDecoder::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for p in pieces {
        buf.extend_from_slice(p);
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(Decoded::Data(d))) => out.extend_from_slice(&d),
                Ok(Some(Decoded::End)) => return Ok((out, true)),
                Ok(None) => break,
                Err(_) => return Err(()),
            }
        }
    }
    Ok((out, false))
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut).min(rest.len());
    let whole = decode(&[rest]);
    let split = decode(&[&rest[..at], &rest[at..]]);
    if let Ok((out, _)) = &whole {
        assert!(out.len() <= rest.len());
    }
    // A stream that ended or failed whole does the same split.
    if let (Ok((a, true)), Ok((b, true))) = (&whole, &split) {
        assert_eq!(a, b);
    }
    assert_eq!(whole.is_err(), split.is_err());
});
