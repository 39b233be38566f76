//! The header map: an ordered list of name/value pairs sharing the buffer
//! they were parsed from, looked up case-insensitively.

use bytes::Bytes;

/// What a message's `Connection` fields say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionOptions {
    /// A `close` token.
    pub close: bool,
    /// A `keep-alive` token.
    pub keep_alive: bool,
    /// The first token that names a field that may not be removed as
    /// hop-by-hop.
    pub end_to_end: Option<&'static str>,
}

/// One header field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: Bytes,
    pub value: Bytes,
}

/// An ordered header list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    list: Vec<Header>,
}

/// Headers that belong to one connection and are never forwarded.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
];

/// Fields a `Connection` header may not name: a proxy that removed them
/// as hop-by-hop would change how the message is framed, whom it is for,
/// or who sent it (`Connection: Content-Length` smuggles a body as a
/// request; `Connection: Host` or `X-Forwarded-For` hides them from the
/// origin). Varnish refuses the same list, the standard fields it knows
/// that are not hop-by-hop themselves.
pub const NOT_NAMEABLE_BY_CONNECTION: &[&str] = &[
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "set-cookie",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "x-forwarded-for",
];

/// Whether two field names are the same, as HTTP compares them (ASCII
/// case-insensitively). Every lookup by name compares with it, on every
/// request and several times in a VCL program, so it compares eight bytes
/// at a time (each folded to lower case at once), not byte by byte.
#[inline]
pub fn name_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a.eq_ignore_ascii_case(b);
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        lower8(u64::from_le_bytes(w))
    };
    let mut at = 0;
    while at + 8 < n {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    // The last eight bytes, overlapping the word before when `n` is not a
    // multiple of eight.
    word(a, n - 8) == word(b, n - 8)
}

/// The eight bytes of `x` with ASCII capitals made small: a byte whose
/// high bit is clear and whose low seven bits lie in `A..=Z` gets 0x20
/// added, computed for all eight at once without carries between them.
#[inline]
fn lower8(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low = x & LOW7;
    // The high bit of each byte set where it is at least b'A' (0x41 +
    // 0x3f = 0x80) and where it is past b'Z' (0x5b + 0x25 = 0x80).
    let from_a = low + 0x3f3f_3f3f_3f3f_3f3f;
    let past_z = low + 0x2525_2525_2525_2525;
    let capital = from_a & !past_z & !x & HIGH;
    x | (capital >> 2)
}

/// Field lists each thread keeps for its next requests, and the largest
/// kept (a list that held more fields is let go).
const SPARE_LIST_COUNT: usize = 8;
const SPARE_LIST_MAX: usize = 64;

thread_local! {
    static SPARE_LISTS: std::cell::RefCell<Vec<Vec<Header>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Headers {
    /// The list, emptied, goes back to the thread for its next
    /// [`Headers::with_capacity`].
    fn drop(&mut self) {
        let cap = self.list.capacity();
        if !(4..=SPARE_LIST_MAX).contains(&cap) {
            return;
        }
        let mut list = std::mem::take(&mut self.list);
        list.clear();
        let _ = SPARE_LISTS.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_LIST_COUNT {
                spare.push(list);
            }
        });
    }
}

impl Headers {
    pub fn new() -> Self {
        Headers { list: Vec::new() }
    }

    /// An empty list with room for `n` fields: a list the thread kept
    /// from a dropped one when it has room enough (a request's fields
    /// are a list made and dropped for every request).
    pub fn with_capacity(n: usize) -> Self {
        let kept = SPARE_LISTS
            .try_with(|spare| {
                let mut spare = spare.borrow_mut();
                match spare.last() {
                    Some(list) if list.capacity() >= n => spare.pop(),
                    _ => None,
                }
            })
            .ok()
            .flatten();
        Headers {
            list: kept.unwrap_or_else(|| Vec::with_capacity(n)),
        }
    }

    /// A header list from static name/value pairs.
    pub fn from_static_pairs(pairs: &[(&'static str, &'static str)]) -> Self {
        let mut out = Headers::with_capacity(pairs.len());
        for (n, v) in pairs {
            out.append(*n, *v);
        }
        out
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Header> {
        self.list.iter()
    }

    /// The first value of a header.
    pub fn get(&self, name: &str) -> Option<&Bytes> {
        self.list
            .iter()
            .find(|h| name_eq(&h.name, name.as_bytes()))
            .map(|h| &h.value)
    }

    /// Every value of a header, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Bytes> + 'a {
        self.list
            .iter()
            .filter(move |h| name_eq(&h.name, name.as_bytes()))
            .map(|h| &h.value)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Appends an already-built field.
    pub fn push_raw(&mut self, header: Header) {
        self.list.push(header);
    }

    /// Appends a field.
    pub fn append(&mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) {
        self.list.push(Header {
            name: name.into(),
            value: value.into(),
        });
    }

    /// Replaces every field of that name with one.
    pub fn set(&mut self, name: &'static str, value: impl Into<Bytes>) {
        self.replace(
            name,
            value.into(),
            |n| Bytes::from_static(n.as_bytes()),
            |_| {},
        );
    }

    /// Replaces every field of a name known only at run time with one.
    pub fn set_named(&mut self, name: &str, value: Bytes) {
        self.set_named_noting(name, value, |_| {});
    }

    /// [`Headers::set_named`], showing `replaced` each field it replaces
    /// or drops, in order, in the same pass (what VCL's `set` logs as
    /// unset); the value as now kept. As VCL's `set` does in varnishd,
    /// the fields of that name go and the new one comes last, spelled as
    /// VCL spelled it (so a normalised `Accept-Encoding` follows the
    /// `X-Forwarded-For` added before `vcl_recv`, on the wire as in the
    /// log).
    pub fn set_named_noting(
        &mut self,
        name: &str,
        value: Bytes,
        replaced: impl FnMut(&Header),
    ) -> &Bytes {
        self.remove_noting(name, replaced);
        self.append(Bytes::copy_from_slice(name.as_bytes()), value);
        &self.list[self.list.len() - 1].value
    }

    /// Removes every field of that name.
    pub fn remove(&mut self, name: &str) {
        self.remove_noting(name, |_| {});
    }

    /// [`Headers::remove`], showing `removed` each field it removes, in
    /// order, in the same pass.
    pub fn remove_noting(&mut self, name: &str, mut removed: impl FnMut(&Header)) {
        self.list.retain(|h| {
            let gone = name_eq(&h.name, name.as_bytes());
            if gone {
                removed(h);
            }
            !gone
        });
    }

    /// Puts `value` in the first field of that name and drops the others,
    /// showing `replaced` each of them first; appends a field (its name
    /// made by `make_name`) when there is none. The value as now kept.
    fn replace<'n>(
        &mut self,
        name: &'n str,
        value: Bytes,
        make_name: impl FnOnce(&'n str) -> Bytes,
        mut replaced: impl FnMut(&Header),
    ) -> &Bytes {
        let mut first = None;
        let mut i = 0;
        while i < self.list.len() {
            if !name_eq(&self.list[i].name, name.as_bytes()) {
                i += 1;
                continue;
            }
            replaced(&self.list[i]);
            if first.is_none() {
                first = Some(i);
                i += 1;
            } else {
                self.list.remove(i);
            }
        }
        let at = match first {
            Some(at) => {
                self.list[at].value = value;
                at
            }
            None => {
                self.append(make_name(name), value);
                self.list.len() - 1
            }
        };
        &self.list[at].value
    }

    /// Whether any value of a comma-separated header holds `token`
    /// (case-insensitive).
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.get_all(name).any(|v| {
            v.split(|&b| b == b',')
                .any(|t| trim(t).eq_ignore_ascii_case(token.as_bytes()))
        })
    }

    /// What the `Connection` fields say, read in one pass over their
    /// tokens: `close`, `keep-alive`, and the first field a token names
    /// although it may not be removed as hop-by-hop
    /// ([`NOT_NAMEABLE_BY_CONNECTION`]).
    pub fn connection_options(&self) -> ConnectionOptions {
        let mut o = ConnectionOptions::default();
        for v in self.get_all("connection") {
            for t in v.split(|&b| b == b',').map(trim) {
                // The usual tokens, which the table does not hold.
                if t.eq_ignore_ascii_case(b"close") {
                    o.close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    o.keep_alive = true;
                } else if o.end_to_end.is_none() {
                    o.end_to_end = NOT_NAMEABLE_BY_CONNECTION
                        .iter()
                        .find(|n| t.eq_ignore_ascii_case(n.as_bytes()))
                        .copied();
                }
            }
        }
        o
    }

    /// Every value of a field joined into one list (`a, b`), as a
    /// repeated list-valued field means (RFC 9110 §5.3); None when absent.
    pub fn get_joined(&self, name: &str) -> Option<Bytes> {
        let mut values = self.get_all(name);
        let first = values.next()?;
        let Some(second) = values.next() else {
            return Some(first.clone());
        };
        let mut out = Vec::with_capacity(first.len() + second.len() + 2);
        out.extend_from_slice(first);
        for v in std::iter::once(second).chain(values) {
            out.extend_from_slice(b", ");
            out.extend_from_slice(v);
        }
        Some(Bytes::from(out))
    }

    /// Folds a repeated list-valued field into its first line (`a, b`),
    /// as Varnish does with `Cache-Control` and `Vary`; nothing changes
    /// when it appears once or not at all.
    pub fn collect(&mut self, name: &str) {
        let mut lines = self
            .list
            .iter()
            .enumerate()
            .filter(|(_, h)| name_eq(&h.name, name.as_bytes()));
        let Some((first, _)) = lines.next() else {
            return;
        };
        if lines.next().is_none() {
            return;
        }
        let joined = self.get_joined(name).expect("present");
        let mut seen = false;
        self.list.retain(|h| {
            let this = name_eq(&h.name, name.as_bytes());
            let keep = !this || !seen;
            seen |= this;
            keep
        });
        self.list[first].value = joined;
    }

    /// Removes the hop-by-hop headers and every header that `Connection`
    /// names.
    pub fn remove_hop_by_hop(&mut self) {
        self.remove_connection_named();
        self.remove_fixed_hop_by_hop();
    }

    /// The values of the fields `Connection` names, as they are now:
    /// what a client sent for this hop alone. They stay visible (to VCL);
    /// [`Headers::remove_values`] takes exactly these out of a copy
    /// later, so that a field VCL sets under such a name goes on.
    pub fn connection_named_values(&self) -> Vec<Header> {
        let named = |name: &[u8]| {
            self.get_all("connection").any(|v| {
                v.split(|&b| b == b',')
                    .any(|t| trim(t).eq_ignore_ascii_case(name))
            })
        };
        // The tokens gathered once (the usual few on the stack), then
        // field by field, so that a token repeated (or a long list) makes
        // no more entries than there are fields.
        const FEW: usize = 8;
        let mut few: [&[u8]; FEW] = [&[]; FEW];
        let mut count = 0;
        for v in self.get_all("connection") {
            for t in v.split(|&b| b == b',').map(trim).filter(|t| !t.is_empty()) {
                if count < FEW {
                    few[count] = t;
                }
                count += 1;
            }
        }
        if count == 0 {
            return Vec::new();
        }
        let hop = |h: &&Header| {
            !h.name.eq_ignore_ascii_case(b"connection")
                && match count <= FEW {
                    true => few[..count].iter().any(|t| name_eq(&h.name, t)),
                    false => named(&h.name),
                }
        };
        self.list.iter().filter(hop).cloned().collect()
    }

    /// Removes the fields that are one of `fields`: the same name with
    /// the very same value bytes, not equal ones (see
    /// [`Headers::connection_named_values`]).
    pub fn remove_values(&mut self, fields: &[Header]) {
        if fields.is_empty() {
            return;
        }
        self.list.retain(|h| {
            !fields.iter().any(|f| {
                f.value.as_ptr() == h.value.as_ptr()
                    && f.value.len() == h.value.len()
                    && name_eq(&f.name, &h.name)
            })
        });
    }

    /// Removes the fields `Connection` names (it stays).
    pub fn remove_connection_named(&mut self) {
        let mut named: Vec<Bytes> = Vec::new();
        for v in self.get_all("connection") {
            for t in v.split(|&b| b == b',') {
                let t = trim(t);
                if !t.is_empty() && !t.eq_ignore_ascii_case(b"connection") {
                    named.push(Bytes::copy_from_slice(t));
                }
            }
        }
        if named.is_empty() {
            return;
        }
        self.list
            .retain(|h| !named.iter().any(|n| name_eq(&h.name, n)));
    }

    /// Removes the fields that are hop-by-hop by definition
    /// ([`HOP_BY_HOP`]).
    pub fn remove_fixed_hop_by_hop(&mut self) {
        self.list
            .retain(|h| !HOP_BY_HOP.iter().any(|n| name_eq(&h.name, n.as_bytes())));
    }

    /// Serialises every field as `name: value\r\n`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        for h in &self.list {
            out.extend_from_slice(&h.name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(&h.value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Whether a `Content-Encoding` value says gzip (`gzip` or `x-gzip`).
pub fn is_gzip(content_encoding: &[u8]) -> bool {
    let v = trim(content_encoding);
    v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip")
}

/// Whether a byte may appear in a token such as a field name (RFC 9110
/// `tchar`).
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Trims optional white space (spaces and tabs) from both ends.
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Fields that speak of an HTTP/1 connection, not of the message: they
/// have no place in HTTP/2 (RFC 9113 §8.2.2) nor HTTP/3 (RFC 9114 §4.2).
pub fn connection_specific(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_remove_show_each_field_they_replace_in_order() {
        let mut hs = h(&[("Cookie", "a"), ("Host", "h"), ("cookie", "b")]);
        let mut seen = Vec::new();
        let kept = hs.set_named_noting("COOKIE", Bytes::from_static(b"c"), |f| {
            seen.push(f.value.clone())
        });
        assert_eq!(kept, "c");
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(hs.get_all("cookie").collect::<Vec<_>>(), ["c"]);
        // As varnishd's `set`: the new field comes last, spelled as set.
        let names: Vec<&[u8]> = hs.iter().map(|f| &f.name[..]).collect();
        assert_eq!(names, [&b"Host"[..], &b"COOKIE"[..]]);
        seen.clear();
        hs.set_named_noting("X-New", Bytes::from_static(b"n"), |f| {
            seen.push(f.value.clone())
        });
        assert!(seen.is_empty());
        assert_eq!(hs.get("x-new").map(|v| &v[..]), Some(&b"n"[..]));
        hs.remove_noting("cookie", |f| seen.push(f.value.clone()));
        assert_eq!(seen, ["c"]);
        assert_eq!(hs.len(), 2);
    }

    #[test]
    fn names_compare_as_ascii_case_folding_does_for_every_byte_pair() {
        // Every pair of bytes, in the first, a middle and the last place
        // of names shorter than a word, of one word, and past one.
        for len in [1, 7, 8, 9, 15, 16, 23] {
            for at in [0, len / 2, len - 1] {
                let mut a = b"Accept-Encoding-X-Forward".to_vec();
                a.truncate(len);
                let mut b = a.to_ascii_lowercase();
                for x in 0..=255u8 {
                    for y in 0..=255u8 {
                        a[at] = x;
                        b[at] = y;
                        assert_eq!(
                            name_eq(&a, &b),
                            a.eq_ignore_ascii_case(&b),
                            "{len} {at} {x:#x} {y:#x}"
                        );
                    }
                }
            }
        }
        assert!(name_eq(b"X-Forwarded-For", b"x-forwarded-for"));
        assert!(!name_eq(b"Accept-Encoding", b"X-Forwarded-For"));
        assert!(!name_eq(b"Host", b"Hos"));
        assert!(name_eq(b"", b""));
    }

    fn h(pairs: &[(&'static str, &'static str)]) -> Headers {
        Headers::from_static_pairs(pairs)
    }

    #[test]
    fn lookup_is_case_insensitive() {
        let hs = h(&[("Host", "a"), ("X-Foo", "1"), ("x-foo", "2")]);
        assert_eq!(hs.get("host").unwrap(), "a");
        assert_eq!(hs.get_all("X-FOO").count(), 2);
    }

    /// A dropped list serves the thread's next one that fits in it,
    /// emptied; a list too large to keep, or one that needs more room,
    /// is not taken.
    #[test]
    fn a_dropped_list_serves_the_next_request_on_its_thread() {
        let mut first = Headers::with_capacity(8);
        first.append("Host", "a");
        let at = first.list.as_ptr();
        drop(first);
        let next = Headers::with_capacity(6);
        assert_eq!(next.list.as_ptr(), at);
        assert!(next.is_empty());
        drop(next);
        let larger = Headers::with_capacity(9);
        assert_ne!(larger.list.as_ptr(), at);
        drop(larger);
        let kept = || SPARE_LISTS.with(|s| s.borrow().len());
        let before = kept();
        let mut huge = Headers::with_capacity(SPARE_LIST_MAX + 1);
        huge.append("A", "b");
        drop(huge);
        assert_eq!(kept(), before, "a list too large is let go");
        drop(Headers {
            list: Vec::with_capacity(4),
        });
        assert_eq!(kept(), before + 1);
    }

    #[test]
    fn set_replaces_all() {
        let mut hs = h(&[("X-Foo", "1"), ("A", "b"), ("x-foo", "2")]);
        hs.set("X-Foo", "3");
        assert_eq!(hs.get_all("x-foo").collect::<Vec<_>>(), vec!["3"]);
        assert_eq!(hs.len(), 2);
    }

    #[test]
    fn hop_by_hop_removed_with_connection_tokens() {
        let mut hs = h(&[
            ("Connection", "keep-alive, X-Private"),
            ("Keep-Alive", "timeout=5"),
            ("X-Private", "secret"),
            ("TE", "trailers"),
            ("Host", "example.com"),
        ]);
        hs.remove_hop_by_hop();
        assert_eq!(hs.len(), 1);
        assert!(hs.contains("host"));
    }

    #[test]
    fn connection_may_not_name_end_to_end_fields() {
        let end_to_end = |hs: Headers| hs.connection_options().end_to_end;
        let hs = h(&[("Connection", "keep-alive, X-Private, Upgrade")]);
        assert_eq!(end_to_end(hs), None);
        let hs = h(&[("Connection", "close"), ("Connection", " content-LENGTH ")]);
        assert_eq!(end_to_end(hs), Some("content-length"));
        let hs = h(&[("Connection", "Host")]);
        assert_eq!(end_to_end(hs), Some("host"));
        let hs = h(&[("Connection", "x-forwarded-for,te, host")]);
        assert_eq!(end_to_end(hs), Some("x-forwarded-for"), "the first");
    }

    #[test]
    fn connection_options_are_read_from_every_field() {
        let options = |pairs: &[(&'static str, &'static str)]| h(pairs).connection_options();
        let none = ConnectionOptions::default();
        assert_eq!(options(&[]), none);
        assert_eq!(options(&[("X-Close", "close")]), none);
        assert_eq!(options(&[("Connection", "closed, keep-alivex")]), none);
        let both = options(&[
            ("Connection", "Upgrade"),
            ("Host", "h"),
            ("connection", " Keep-Alive ,x, CLOSE "),
        ]);
        assert!(both.close && both.keep_alive && both.end_to_end.is_none());
        let close = options(&[("Connection", "age"), ("Connection", "close")]);
        assert!(close.close && !close.keep_alive);
        assert_eq!(close.end_to_end, Some("age"));
    }

    #[test]
    fn repeated_fields_join_as_one_list() {
        let hs = h(&[("XFF", "1.1.1.1"), ("A", "b"), ("xff", "2.2.2.2")]);
        assert_eq!(hs.get_joined("xff").unwrap(), "1.1.1.1, 2.2.2.2");
        let hs = h(&[("XFF", "1.1.1.1")]);
        assert_eq!(hs.get_joined("xff").unwrap(), "1.1.1.1");
        assert_eq!(hs.get_joined("nope"), None);
    }

    #[test]
    fn tokens() {
        let hs = h(&[("Connection", "Keep-Alive , Upgrade")]);
        assert!(hs.has_token("connection", "keep-alive"));
        assert!(hs.has_token("connection", "upgrade"));
        assert!(!hs.has_token("connection", "close"));
    }
}

#[cfg(test)]
mod collect_tests {
    use super::*;

    #[test]
    fn collect_folds_repeats_into_the_first_line() {
        let mut h = Headers::new();
        h.append("Cache-Control", "foo");
        h.append("X", "1");
        h.append("cache-control", "bar");
        h.collect("cache-control");
        assert_eq!(h.len(), 2);
        assert_eq!(h.get("cache-control").unwrap(), "foo, bar");
        assert_eq!(h.iter().next().unwrap().name, "Cache-Control");
        let mut once = Headers::new();
        once.append("Vary", "a");
        once.collect("vary");
        assert_eq!(once.get("vary").unwrap(), "a");
    }
}

#[cfg(test)]
mod connection_tests {
    use super::*;

    #[test]
    fn what_connection_names_is_kept_from_a_copy_unless_set_anew() {
        let mut h = Headers::new();
        h.append("Connection", "foo, FromVCL, close");
        h.append("Foo", "bar");
        h.append("Other", "1");
        let named = h.connection_named_values();
        assert_eq!(named.len(), 1);
        let mut many = Headers::new();
        many.append("Connection", "a,a,a,a,a,a,a,a");
        many.append("A", "1");
        assert_eq!(many.connection_named_values().len(), 1, "one per field");
        // Past the tokens kept on the stack, and over two fields.
        many.append("Connection", "b, c, d, e, f, g, h, i, j, z");
        many.append("Z", "2");
        many.append("Y", "3");
        let names: Vec<_> = many
            .connection_named_values()
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(names, ["A", "Z"]);
        let mut two = Headers::new();
        two.append("Connection", "close");
        two.append("connection", " keep-alive ,x-hop");
        two.append("X-Hop", "1");
        two.append("Keep-Alive", "timeout=5");
        two.append("X-Other", "2");
        assert_eq!(two.connection_named_values().len(), 2);
        assert_eq!(two.connection_options().end_to_end, None);
        two.append("Connection", "Close, Age");
        assert_eq!(two.connection_options().end_to_end, Some("age"));
        h.append("FromVCL", "123");
        h.set_named("X", h.get("foo").cloned().unwrap());
        let mut copy = h.clone();
        copy.remove_values(&named);
        assert!(copy.get("foo").is_none(), "the client's own is kept back");
        assert_eq!(copy.get("fromvcl").unwrap(), "123", "set after: goes on");
        assert_eq!(copy.get("x").unwrap(), "bar", "another name: goes on");
        assert_eq!(copy.get("other").unwrap(), "1");
    }
}
