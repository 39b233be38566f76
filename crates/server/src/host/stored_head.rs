//! The head a cached or passed object keeps: its status line and fields
//! as the response gave them, without hop-by-hop fields and those a
//! caller names, and with the origin's `Content-Length` where the stored
//! body is the one it announced; packed for an object, or as text for a
//! pass.

use lacquer_cache::object::StoredHead;
use lacquer_http::headers::name_eq;
use lacquer_http::ResponseHead;

/// What a stored head keeps of the response's `Content-Length`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum HeadLength {
    /// As `skip` says: dropped when it names `Content-Length` (the
    /// stored body is not the one announced), else kept as it came.
    AsSkip,
    /// The first in its place, saying this length (the stored body's).
    Of(u64),
    /// Each as it came (a response to a HEAD: no body is stored).
    AsItCame,
}

/// The head a cached or passed object keeps: the status line and the
/// fields without hop-by-hop ones and those in `skip` (but for
/// `Content-Length`, which `length` decides), with a `Date` (`now`) when
/// the response had none; each line ends in CRLF, without the blank line.
/// Written at the end of `block`.
fn write_stored_head(
    resp: &ResponseHead,
    now: f64,
    skip: &[&str],
    length: HeadLength,
    block: &mut Vec<u8>,
) {
    let mut kept = resp.headers.clone();
    kept.remove_hop_by_hop();
    for name in skip {
        if length == HeadLength::AsSkip || !name.eq_ignore_ascii_case("content-length") {
            kept.remove(name);
        }
    }
    block.extend_from_slice(b"HTTP/1.1 ");
    block.extend_from_slice(resp.status.to_string().as_bytes());
    block.push(b' ');
    if resp.reason.is_empty() {
        block.extend_from_slice(lacquer_http::reason_phrase(resp.status).as_bytes());
    } else {
        block.extend_from_slice(&resp.reason);
    }
    block.extend_from_slice(b"\r\n");
    let push = |block: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        block.extend_from_slice(name);
        block.extend_from_slice(b": ");
        block.extend_from_slice(value);
        block.extend_from_slice(b"\r\n");
    };
    let mut length_written = false;
    for h in kept.iter() {
        if let (HeadLength::Of(n), true) = (length, name_eq(&h.name, b"content-length")) {
            if !std::mem::replace(&mut length_written, true) {
                let mut value = Vec::with_capacity(20);
                lacquer_shm::record::push_u64(&mut value, n);
                push(block, &h.name, &value);
            }
            continue;
        }
        push(block, &h.name, &h.value);
    }
    if !kept.contains("date") {
        lacquer_core::time::with_date(now, |d| push(block, b"Date", d.as_bytes()));
    }
}

/// The stored head's text (see [`write_stored_head`]), for a pass.
pub(crate) fn stored_head(
    resp: &ResponseHead,
    now: f64,
    skip: &[&str],
    length: HeadLength,
) -> Vec<u8> {
    let mut block = Vec::with_capacity(resp.wire_len + 64);
    write_stored_head(resp, now, skip, length, &mut block);
    block
}

/// The stored head packed for an object (see [`write_stored_head`]):
/// the text is written in room the thread keeps, so the packed head is
/// the only allocation made, and nothing larger is let go after it.
pub(crate) fn packed_stored_head(
    resp: &ResponseHead,
    now: f64,
    skip: &[&str],
    length: HeadLength,
) -> StoredHead {
    thread_local! {
        static ROOM: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    ROOM.with(|room| {
        let mut room = room.borrow_mut();
        room.clear();
        write_stored_head(resp, now, skip, length, &mut room);
        let head = StoredHead::pack(&room, resp.status);
        if room.capacity() > 64 * 1024 {
            *room = Vec::new();
        }
        head
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use lacquer_http::Headers;

    /// A 200 with a six-byte body and these fields.
    fn ok_of_six(headers: Headers) -> ResponseHead {
        ResponseHead {
            version: lacquer_http::Version::Http11,
            status: 200,
            reason: Bytes::from_static(b"OK"),
            headers,
            framing: lacquer_http::Framing::Length(6),
            keep_alive: true,
            wire_len: 200,
        }
    }

    #[test]
    fn a_stored_head_is_its_status_line_and_the_fields_kept() {
        let mut headers = Headers::new();
        headers.append("Server", "origin");
        headers.append("Content-Length", "6");
        headers.append("Connection", "keep-alive");
        let resp = ok_of_six(headers);
        let skip = ["content-length"];
        let head = stored_head(&resp, 0.0, &skip, HeadLength::AsSkip);
        assert!(head.starts_with(b"HTTP/1.1 200 OK\r\nServer: origin\r\nDate: "));
        assert!(head.ends_with(b" GMT\r\n"), "no blank line");
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(!text.contains("connection"), "hop-by-hop goes");
        assert!(!text.contains("content-length"), "skipped");
    }

    #[test]
    fn the_origins_length_stays_in_its_place_with_the_bodys_value() {
        let mut headers = Headers::new();
        headers.append("Server", "origin");
        headers.append("Content-Length", "006");
        headers.append("X-After", "1");
        let resp = ok_of_six(headers);
        let skip = ["content-length", "age"];
        let head = stored_head(&resp, 0.0, &skip, HeadLength::Of(6));
        let text = String::from_utf8_lossy(&head);
        assert!(
            text.starts_with(
                "HTTP/1.1 200 OK\r\nServer: origin\r\nContent-Length: 6\r\nX-After: 1\r\n"
            ),
            "{text}"
        );
        let head = stored_head(&resp, 0.0, &skip, HeadLength::AsItCame);
        assert!(String::from_utf8_lossy(&head).contains("Content-Length: 006\r\n"));
        let head = stored_head(&resp, 0.0, &skip, HeadLength::AsSkip);
        assert!(!String::from_utf8_lossy(&head).contains("Content-Length"));
    }
}
