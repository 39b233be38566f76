//! Edits to a response head already written out as text (the status
//! line and fields, each line ending in CRLF): a field removed, an
//! `ETag` made weak, `Accept-Encoding` added to `Vary`. Delivery makes
//! them when the body goes out other than as stored (inflated, in
//! another coding), and a rendition's head is made with them. The one
//! weakening of an `ETag` held in a field list (a fetch's, a pass's, a
//! revalidated head's) is here too, so that both forms say the same.

use lacquer_http::Headers;

/// Makes a field list's `ETag` weak (`W/"…"`) where it is strong: the
/// body is, or goes out, transformed, so it is no longer the bytes a
/// strong validator names.
pub(crate) fn weaken_etag(headers: &mut Headers) {
    if let Some(etag) = headers.get("etag").filter(|e| !e.starts_with(b"W/")) {
        let weak = [&b"W/"[..], etag].concat();
        headers.set("ETag", weak);
    }
}

/// Removes every `name:` line from a serialised head.
pub(crate) fn remove_header_line(head: &mut Vec<u8>, name: &[u8]) {
    let mut out = Vec::with_capacity(head.len());
    for line in head.split_inclusive(|&b| b == b'\n') {
        let matches = line.len() > name.len()
            && line[..name.len()].eq_ignore_ascii_case(name)
            && line[name.len()] == b':';
        if !matches {
            out.extend_from_slice(line);
        }
    }
    *head = out;
}

/// Makes the head's `ETag` weak (`W/"…"`): the body goes out transformed
/// (inflated), so it is no longer the bytes a strong validator names.
pub(crate) fn weaken_etag_line(head: &mut Vec<u8>) {
    const NAME: &[u8] = b"etag:";
    let mut at = 0;
    for line in head.split_inclusive(|&b| b == b'\n') {
        if line.len() > NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME) {
            let value = NAME.len()
                + line[NAME.len()..]
                    .iter()
                    .take_while(|&&b| b == b' ' || b == b'\t')
                    .count();
            if !line[value..].starts_with(b"W/") {
                let pos = at + value;
                head.splice(pos..pos, *b"W/");
            }
            return;
        }
        at += line.len();
    }
}

/// Adds `Accept-Encoding` to a serialised head's `Vary` (a line of its
/// own when there is none, or none that names it).
pub(crate) fn vary_accept_encoding_line(head: &mut Vec<u8>) {
    const NAME: &[u8] = b"vary:";
    let named = head.split(|&b| b == b'\n').any(|line| {
        line.len() > NAME.len()
            && line[..NAME.len()].eq_ignore_ascii_case(NAME)
            && (has_token(&line[NAME.len()..], b"accept-encoding")
                || has_token(&line[NAME.len()..], b"*"))
    });
    if !named {
        head.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
}

/// Whether a comma-separated list names `token` (case-insensitive).
pub(crate) fn has_token(list: &[u8], token: &[u8]) -> bool {
    list.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_lists_strong_etag_is_weakened_once() {
        let mut h = Headers::new();
        h.append("ETag", "\"x\"");
        weaken_etag(&mut h);
        assert_eq!(h.get("etag").unwrap().as_ref(), b"W/\"x\"");
        weaken_etag(&mut h);
        assert_eq!(h.get("etag").unwrap().as_ref(), b"W/\"x\"");
        let mut none = Headers::new();
        weaken_etag(&mut none);
        assert!(none.get("etag").is_none());
    }

    #[test]
    fn an_inflated_delivery_weakens_the_etag() {
        let mut head = b"HTTP/1.1 200 OK\r\nETag: \"foo\"\r\nX: y\r\n".to_vec();
        weaken_etag_line(&mut head);
        assert_eq!(head, b"HTTP/1.1 200 OK\r\nETag: W/\"foo\"\r\nX: y\r\n");
        weaken_etag_line(&mut head);
        assert_eq!(
            head, b"HTTP/1.1 200 OK\r\nETag: W/\"foo\"\r\nX: y\r\n",
            "once"
        );
    }
}
