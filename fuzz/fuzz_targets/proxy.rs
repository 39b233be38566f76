//! The PROXY header reader, fed a header in two pieces split anywhere:
//! never a panic, never more taken than was given or allowed, the same
//! answer however split, and whatever it accepts writes back the same.
#![no_main]
#![forbid(unsafe_code)]
use lacquer_http::proxy::{parse, write_v1, write_v2};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let max = 512;
    let whole = parse(rest, max);
    if let Ok(Some((h, used))) = &whole {
        assert!(*used <= rest.len() && *used <= max);
        // A prefix of an accepted header asks for more.
        let at = usize::from(cut).min(*used);
        if at < *used {
            assert_eq!(parse(&rest[..at], max), Ok(None));
        }
        if let Some((client, server)) = h.addrs {
            let again = if h.version == 1 {
                write_v1(client, server)
            } else {
                write_v2(client, server, &[])
            };
            let (back, _) = parse(&again, max).unwrap().unwrap();
            assert_eq!(
                back.addrs.map(|(c, s)| (
                    c.ip().to_canonical(),
                    s.ip().to_canonical(),
                    c.port(),
                    s.port()
                )),
                Some((
                    client.ip().to_canonical(),
                    server.ip().to_canonical(),
                    client.port(),
                    server.port()
                ))
            );
        }
    }
});
