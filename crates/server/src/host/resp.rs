//! The response `vcl_deliver` and `vcl_synth` work on. For a cached
//! object, the headers VCL changes are kept as edits over the object's
//! stored headers (one new value or a removal per name) and applied as the
//! head is written, so a hit copies no header even when VCL decorates it.

use bytes::Bytes;
use lacquer_cache::object::Object;
use lacquer_http::headers::name_eq;
use lacquer_http::{Headers, Status};

/// What a response's head says of its body's length.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum LengthField {
    /// Nothing.
    Absent,
    /// The object's stored `Content-Length`, as stored.
    Stored,
    /// One VCL or the response's own fields set: its value, if it is one
    /// number.
    Set(Option<u64>),
}

pub(crate) struct Resp {
    pub status: Status,
    pub reason: Bytes,
    /// The whole header set, when the response is not an object's (a
    /// synthetic or passed response). `None`: the object's, with `edits`.
    pub headers: Option<Headers>,
    /// Per header name, its one new value or `None` for a removal, over
    /// the object's headers.
    edits: EditList,
    /// The synthetic body (`vcl_synth`).
    pub body: Vec<u8>,
    /// VCL touched Age, Via or X-Varnish: they are in the headers and the
    /// writer must not add its own.
    pub own_delivery_headers: bool,
    pub hit: bool,
    pub changed: bool,
}

/// The reason phrase in an object's stored status line (a copy: the
/// head is never cloned, see `Object::headers`).
pub(crate) fn obj_reason(obj: &Object) -> Bytes {
    Bytes::copy_from_slice(reason_in(obj))
}

/// The reason phrase in an object's stored status line, borrowed.
fn reason_in(obj: &Object) -> &[u8] {
    obj.reason()
}

impl Resp {
    pub fn for_object(obj: &Object, hit: bool) -> Resp {
        Resp {
            status: Status::new(obj.status()),
            reason: Bytes::new(),
            headers: None,
            edits: EditList::default(),
            body: Vec::new(),
            own_delivery_headers: false,
            hit,
            changed: false,
        }
    }

    /// An object's response with `fields` added: those kept out of the
    /// stored object for the client whose request fetched it.
    pub fn with_fields(obj: &Object, fields: Headers) -> Resp {
        let mut headers = obj.headers();
        for h in fields.iter() {
            headers.append(h.name.clone(), h.value.clone());
        }
        Resp::with_headers(Status::new(obj.status()), obj_reason(obj), headers)
    }

    /// A response with its own headers (a passed response's).
    pub fn with_headers(status: Status, reason: Bytes, headers: Headers) -> Resp {
        Resp {
            status,
            reason,
            headers: Some(headers),
            edits: EditList::default(),
            body: Vec::new(),
            own_delivery_headers: false,
            hit: false,
            changed: true,
        }
    }

    pub fn synthetic(status: Status, reason: Option<Bytes>) -> Resp {
        let reason = reason.unwrap_or_else(|| Bytes::from_static(status.reason().as_bytes()));
        let mut headers = Headers::new();
        lacquer_core::time::with_date(lacquer_core::time::now(), |d| {
            headers.append("Date", Bytes::copy_from_slice(d.as_bytes()))
        });
        headers.append("Server", "Lacquer");
        Resp::with_headers(status, reason, headers)
    }

    fn edit(&self, name: &str) -> Option<&Option<Bytes>> {
        self.edits
            .iter()
            .find(|(n, _)| name_eq(n, name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// A header's first value.
    pub fn get(&self, obj: Option<&Object>, name: &str) -> Option<Bytes> {
        match self.get_lent(name) {
            Some(own) => own.cloned(),
            None => obj.and_then(|o| o.header(name)),
        }
    }

    /// A header's first value when the response itself decides it (its
    /// own header list, or an edit): None when it is the stored
    /// object's.
    pub fn get_lent(&self, name: &str) -> Option<Option<&Bytes>> {
        if let Some(h) = &self.headers {
            return Some(h.get(name));
        }
        self.edit(name).map(|edited| edited.as_ref())
    }

    /// What the head written for `obj` says of the body's length.
    pub fn length_field(&self, obj: &Object) -> LengthField {
        let parse = |v: &Bytes| lacquer_http::parse_content_length(lacquer_http::headers::trim(v));
        if let Some(h) = &self.headers {
            let mut all = h.get_all("content-length");
            return match all.next() {
                // More than one is never taken as the length.
                Some(v) if all.next().is_none() => LengthField::Set(parse(v)),
                Some(_) => LengthField::Set(None),
                None => LengthField::Absent,
            };
        }
        match self.edit("content-length") {
            Some(Some(v)) => LengthField::Set(parse(v)),
            Some(None) => LengthField::Absent,
            None if obj.head_has_length() => LengthField::Stored,
            None => LengthField::Absent,
        }
    }

    /// Whether the response carries Accept-Ranges: the object's recorded
    /// flag unless VCL edited that header.
    pub fn has_accept_ranges(&self, obj: &Object) -> bool {
        if let Some(h) = &self.headers {
            return h.contains("accept-ranges");
        }
        match self.edit("accept-ranges") {
            Some(edited) => edited.is_some(),
            None => obj.accept_ranges(),
        }
    }

    /// Every value of a header.
    pub fn get_all(&self, obj: Option<&Object>, name: &str) -> Vec<Bytes> {
        if let Some(h) = &self.headers {
            return h.get_all(name).cloned().collect();
        }
        match self.edit(name) {
            Some(edited) => edited.iter().cloned().collect(),
            None => obj
                .map(|o| o.header_refs(name).map(|v| v.to_bytes()).collect())
                .unwrap_or_default(),
        }
    }

    /// [`Resp::set`], telling `note` of each field it removes (name and
    /// value: the log's `RespUnset`), whether the response has its own
    /// fields or edits `obj`'s.
    pub fn set_noting(
        &mut self,
        obj: Option<&Object>,
        name: &str,
        value: Option<Bytes>,
        mut note: impl FnMut((&[u8], &[u8])),
    ) {
        self.changed = true;
        match (&mut self.headers, value) {
            (Some(h), Some(v)) => {
                h.set_named_noting(name, v, |old| note((&old.name, &old.value)));
            }
            (Some(h), None) => h.remove_noting(name, |old| note((&old.name, &old.value))),
            (None, value) => {
                match self.edit(name) {
                    Some(Some(v)) => note((name.as_bytes(), v)),
                    Some(None) => {}
                    None => {
                        if let Some(o) = obj {
                            for (n, v) in o.fields().filter(|(n, _)| name_eq(n, name.as_bytes())) {
                                note((n, &v.bytes()));
                            }
                        }
                    }
                }
                self.set(name, value)
            }
        }
    }

    /// Logs it as built (`RespProtocol`, `RespStatus`, `RespReason`, a
    /// `RespHeader` each, then `X-Varnish`), as varnishd logs a synthetic
    /// response before `vcl_synth` runs.
    pub fn log_as_built(&self, log: &mut lacquer_shm::Txn, xid: u64) {
        if !log.active() {
            return;
        }
        let mut head = Vec::with_capacity(256);
        head.extend_from_slice(b"HTTP/1.1 ");
        head.extend_from_slice((self.status.wire()).to_string().as_bytes());
        head.push(b' ');
        head.extend_from_slice(&self.reason);
        head.extend_from_slice(b"\r\n");
        if let Some(h) = &self.headers {
            h.write_to(&mut head);
        }
        head.extend_from_slice(b"X-Varnish: ");
        head.extend_from_slice(xid.to_string().as_bytes());
        head.extend_from_slice(b"\r\n\r\n");
        log.head(lacquer_shm::packed::HeadKind::Resp, &head);
    }

    /// Sets a header to one value (`None` removes it).
    /// Says where HTTP/3 is (`Alt-Svc`), on a connection whose listener
    /// speaks it too: before `vcl_deliver`, which may change it.
    pub fn advertise(&mut self, conn: &crate::host::req::ConnInfo) {
        if let Some(v) = &conn.addrs.alt_svc {
            self.set("Alt-Svc", Some(v.clone()));
        }
    }

    pub fn set(&mut self, name: &str, value: Option<Bytes>) {
        self.changed = true;
        if let Some(h) = &mut self.headers {
            match value {
                Some(v) => h.set_named(name, v),
                None => h.remove(name),
            }
            return;
        }
        // As varnishd's `set`: the fields of that name go, and the new one
        // comes after every other, so a name set again moves to the end.
        let found = self
            .edits
            .iter()
            .position(|(n, _)| name_eq(n, name.as_bytes()));
        match found {
            Some(i) if value.is_none() => self.edits[i].1 = None,
            Some(i) => {
                let mut e = self.edits.remove(i);
                e.1 = value;
                self.edits.push(e);
            }
            None => {
                if self.edits.capacity() == 0 {
                    self.edits.0 = spare_edits();
                }
                self.edits.push((EditName::new(name.as_bytes()), value))
            }
        }
    }

    /// Adds a header line, keeping those of the name already there (vmod
    /// header): the response's headers become its own copy first.
    pub fn append(&mut self, obj: Option<&Object>, name: &str, value: Bytes) {
        self.changed = true;
        if self.headers.is_none() {
            let mut out = Vec::new();
            match obj {
                Some(o) => self.write_edited(o.fields(), &mut out),
                None => self.write_edited(std::iter::empty(), &mut out),
            }
            let mut headers = Headers::new();
            for line in out.split(|&b| b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if let Some(colon) = line.iter().position(|&b| b == b':') {
                    let value = line[colon + 1..]
                        .strip_prefix(b" ")
                        .unwrap_or(&line[colon + 1..]);
                    headers.append(
                        Bytes::copy_from_slice(&line[..colon]),
                        Bytes::copy_from_slice(value),
                    );
                }
            }
            self.headers = Some(headers);
            self.edits.clear();
        }
        if let Some(h) = &mut self.headers {
            h.append(Bytes::copy_from_slice(name.as_bytes()), value);
        }
    }

    /// Writes the head in place of the object's stored one (VCL changed
    /// it): the status line (or `status_line` when delivery overrides it,
    /// for 304 and 206) and the headers, without the blank line.
    pub fn write_head(&self, obj: &Object, status_line: Option<&[u8]>, out: &mut Vec<u8>) {
        match status_line {
            Some(line) => out.extend_from_slice(line),
            None => {
                let status = self.status.wire();
                out.extend_from_slice(b"HTTP/1.1 ");
                out.extend_from_slice(&[
                    b'0' + (status / 100) as u8,
                    b'0' + (status / 10 % 10) as u8,
                    b'0' + (status % 10) as u8,
                    b' ',
                ]);
                if self.reason.is_empty() {
                    out.extend_from_slice(reason_in(obj));
                } else {
                    out.extend_from_slice(&self.reason);
                }
                out.extend_from_slice(b"\r\n");
            }
        }
        match &self.headers {
            Some(h) => h.write_to(out),
            // The object's fields read in place: no list of them made.
            None if obj.writes_fields_as_read() => self.edit_written_fields(obj, out),
            None => self.write_edited(obj.fields(), out),
        }
    }

    /// Writes the object's headers with the edits applied, as
    /// [`Resp::write_edited`] does, for an object whose fields are written
    /// `Name: value` CRLF: they are written whole (a copy, with where its
    /// lines end, for an object this thread wrote before) and the lines of
    /// edited names are then changed in place, where reading each field
    /// and writing it again would cost a few appends per field.
    fn edit_written_fields(&self, obj: &Object, out: &mut Vec<u8>) {
        let mut written = Written::new(self.edits.len());
        obj.write_fields_then(out, |out, start, ends| {
            // How far the changes so far have moved the lines after them.
            let mut shift = 0isize;
            let mut from = start;
            for &end in ends {
                let (line_at, line_end) = (
                    from.wrapping_add_signed(shift),
                    (start + end as usize).wrapping_add_signed(shift),
                );
                from = start + end as usize;
                // A name has no colon, so the line's name is `n` when the
                // colon comes right after its length.
                let line = &out[line_at..line_end];
                let edit = self.edits.iter().position(|(n, _)| {
                    line.get(n.len()) == Some(&b':') && name_eq(n, &line[..n.len()])
                });
                if edit.is_none() {
                    continue;
                }
                // An edited name's fields go from their place: a new value
                // comes after the fields VCL left alone.
                out.drain(line_at..line_end);
                shift -= (line_end - line_at) as isize;
            }
        });
        self.write_unwritten(&mut written, out);
    }

    /// Writes the object's headers with the edits applied: the fields of
    /// an edited name go, and the new values come last, in the order they
    /// were set, as varnishd's `set` leaves them.
    fn write_edited<'f>(
        &self,
        base: impl Iterator<Item = (&'f [u8], lacquer_cache::FieldValue<'f>)>,
        out: &mut Vec<u8>,
    ) {
        let mut written = Written::new(self.edits.len());
        for (name, value) in base {
            if !self.edits.iter().any(|(n, _)| name_eq(n, name)) {
                line(out, name, &value.bytes());
            }
        }
        self.write_unwritten(&mut written, out);
    }

    /// Writes the edits that set a value, after the object's fields.
    fn write_unwritten(&self, written: &mut Written, out: &mut Vec<u8>) {
        for (i, (name, value)) in self.edits.iter().enumerate() {
            if let (false, Some(v)) = (written.mark(i), value) {
                line(out, name, v);
            }
        }
    }
}

/// One edit: a header's name and its new value, or `None` for a removal.
type Edit = (EditName, Option<Bytes>);

thread_local! {
    /// The edits list of the thread's last response that had one, kept
    /// for its next: a `vcl_deliver` that sets a header on every hit does
    /// not allocate the list and free it again each time.
    static SPARE_EDITS: std::cell::Cell<Vec<Edit>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An empty edits list, the thread's kept one when it has one.
fn spare_edits() -> Vec<Edit> {
    SPARE_EDITS.try_with(|s| s.take()).unwrap_or_default()
}

/// A response's edits, whose list goes back to the thread when the
/// response is done.
#[derive(Default)]
struct EditList(Vec<Edit>);

impl std::ops::Deref for EditList {
    type Target = Vec<Edit>;

    fn deref(&self) -> &Vec<Edit> {
        &self.0
    }
}

impl std::ops::DerefMut for EditList {
    fn deref_mut(&mut self) -> &mut Vec<Edit> {
        &mut self.0
    }
}

impl Drop for EditList {
    #[inline]
    fn drop(&mut self) {
        // Most responses edit nothing and have no list.
        if self.0.capacity() != 0 {
            self.give_back();
        }
    }
}

impl EditList {
    /// Keeps the list, emptied, for the thread's next response; one that
    /// grew past a few edits is let go.
    #[inline(never)]
    fn give_back(&mut self) {
        if self.0.capacity() <= 16 {
            let mut edits = std::mem::take(&mut self.0);
            edits.clear();
            let _ = SPARE_EDITS.try_with(|s| s.set(edits));
        }
    }
}

/// The name an edit is for: in place when it is short, as most are, so
/// that `set resp.http.X-Cache = ...` allocates nothing for its name.
enum EditName {
    Short { len: u8, bytes: [u8; SHORT_NAME] },
    Long(Box<[u8]>),
}

/// The longest name an [`EditName`] keeps in place (the enum is then no
/// larger than a `Bytes`).
const SHORT_NAME: usize = 30;

impl EditName {
    fn new(name: &[u8]) -> EditName {
        if name.len() > SHORT_NAME {
            return EditName::Long(name.into());
        }
        let mut bytes = [0; SHORT_NAME];
        bytes[..name.len()].copy_from_slice(name);
        EditName::Short {
            len: name.len() as u8,
            bytes,
        }
    }
}

impl std::ops::Deref for EditName {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            EditName::Short { len, bytes } => &bytes[..usize::from(*len)],
            EditName::Long(name) => name,
        }
    }
}

/// Appends a field line.
fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Which edits have been written, as bits; VCL that edits more than 64
/// names of one response takes the allocating path.
struct Written {
    few: u64,
    many: Vec<bool>,
}

impl Written {
    fn new(edits: usize) -> Written {
        Written {
            few: 0,
            many: vec![false; if edits > 64 { edits } else { 0 }],
        }
    }

    /// Marks edit `i` written; whether it was already.
    fn mark(&mut self, i: usize) -> bool {
        if i < 64 {
            let seen = self.few & (1 << i) != 0;
            self.few |= 1 << i;
            seen
        } else {
            std::mem::replace(&mut self.many[i], true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_cache::object::{Body, ObjKind, ObjectInit, Timers};

    fn object() -> Object {
        object_with(&[])
    }

    fn object_with(extra: &[(&str, &str)]) -> Object {
        let mut headers = Headers::new();
        for (name, value) in extra {
            headers.append(name.to_string(), value.to_string());
        }
        headers.append("Server", "origin");
        headers.append("X-Dup", "1");
        headers.append("Content-Type", "text/html");
        headers.append("X-Dup", "2");
        Object::new(ObjectInit {
            head: Bytes::from_static(b"HTTP/1.1 200 Fine\r\n").into(),
            headers,
            ..init()
        })
    }

    fn init() -> ObjectInit {
        ObjectInit {
            store: None,
            xid: 7,
            kind: ObjKind::Normal,
            status: 200,
            head: Bytes::new().into(),
            headers: Headers::new(),
            body: Body::complete(Vec::new()),
            vary: None,
            timers: Timers {
                t_origin: 0.0,
                ttl: 1.0,
                grace: 0.0,
                keep: 0.0,
            },
        }
    }

    #[test]
    fn edits_over_an_object_read_and_write_as_a_header_set_would() {
        let obj = object();
        let mut resp = Resp::for_object(&obj, true);
        assert!(!resp.changed, "untouched: the stored head is written");
        resp.set("x-dup", Some(Bytes::from_static(b"new")));
        resp.set("X-Cache", Some(Bytes::from_static(b"HIT")));
        resp.set("server", None);
        resp.set("X-Gone", Some(Bytes::from_static(b"soon")));
        resp.set("x-gone", None);
        assert_eq!(resp.get(Some(&obj), "X-DUP").unwrap(), "new");
        assert_eq!(resp.get(Some(&obj), "server"), None);
        assert_eq!(resp.get(Some(&obj), "content-type").unwrap(), "text/html");
        assert_eq!(
            resp.get_all(Some(&obj), "x-dup"),
            vec![Bytes::from_static(b"new")]
        );
        let head = |r: &Resp| {
            let mut out = Vec::new();
            r.write_head(&obj, None, &mut out);
            String::from_utf8(out).unwrap()
        };
        let edited = head(&resp);
        assert_eq!(
            edited,
            "HTTP/1.1 200 Fine\r\nContent-Type: text/html\r\nx-dup: new\r\nX-Cache: HIT\r\n"
        );
        // The same changes on a copy of the headers give the same head.
        let mut copy = Resp::with_headers(Status::OK, Bytes::new(), obj.headers());
        copy.set("x-dup", Some(Bytes::from_static(b"new")));
        copy.set("X-Cache", Some(Bytes::from_static(b"HIT")));
        copy.set("server", None);
        assert_eq!(head(&copy), edited);
        let mut not_modified = Vec::new();
        resp.write_head(
            &obj,
            Some(b"HTTP/1.1 304 Not Modified\r\n"),
            &mut not_modified,
        );
        assert!(not_modified.starts_with(b"HTTP/1.1 304 Not Modified\r\nContent-Type: "));
    }

    /// A head's fields with `edits` applied, as written out.
    fn edited(obj: &Object, edits: &[(&str, Option<&str>)]) -> String {
        let mut resp = Resp::for_object(obj, true);
        for (name, value) in edits {
            resp.set(name, value.map(|v| Bytes::from(v.to_string())));
        }
        let mut out = Vec::new();
        resp.write_head(obj, Some(b""), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn edits_over_written_fields_give_what_edits_over_read_fields_give() {
        let packed = object_with(&[
            ("X-Dupe", "prefix"),
            ("Date", "Thu, 26 Nov 2026 22:00:00 GMT"),
        ]);
        assert!(packed.writes_fields_as_read());
        let edit_sets: &[&[(&str, Option<&str>)]] = &[
            &[],
            &[("X-Cache", Some("HIT")), ("server", None)],
            &[("x-dup", Some("a much longer value than before"))],
            &[("X-DUP", Some(""))],
            &[("x-dup", None), ("content-type", Some("t"))],
            &[
                ("X-Dupe", Some("p")),
                ("x-dupe", None),
                ("Date", Some("now")),
            ],
            &[
                ("date", None),
                ("X-Dup", Some("z")),
                ("Server", Some("s")),
                ("New", Some("n")),
            ],
            &[("X-Du", Some("no field")), ("X-Dup-Longer-Name", None)],
        ];
        // A head too long to be kept for the next hit is edited alike.
        let long = "b".repeat(3000);
        let big = object_with(&[("X-Big", &long)]);
        // Each edit set twice: written first, then from what was kept.
        for obj in [&packed, &big, &packed, &big] {
            for edits in edit_sets {
                let fast = edited(obj, edits);
                let mut resp = Resp::for_object(obj, true);
                for (name, value) in *edits {
                    resp.set(name, value.map(|v| Bytes::from(v.to_string())));
                }
                let mut slow = Vec::new();
                resp.write_edited(obj.fields(), &mut slow);
                assert_eq!(fast, String::from_utf8(slow).unwrap(), "{edits:?}");
            }
        }
        assert_eq!(
            edited(&packed, edit_sets[6]),
            "X-Dupe: prefix\r\nContent-Type: text/html\r\nX-Dup: z\r\nServer: s\r\nNew: n\r\n"
        );
        assert_eq!(
            edited(&packed, edit_sets[7]),
            "X-Dupe: prefix\r\nDate: Thu, 26 Nov 2026 22:00:00 GMT\r\nServer: origin\r\n\
             X-Dup: 1\r\nContent-Type: text/html\r\nX-Dup: 2\r\nX-Du: no field\r\n"
        );
        // A head kept as its text (a field not written `Name: value`)
        // reads its fields and writes each.
        let text = Object::new(ObjectInit {
            head: Bytes::from_static(b"HTTP/1.1 200 OK\r\nServer:origin\r\nX-Dup: 1\r\n").into(),
            headers: Headers::new(),
            ..init()
        });
        assert!(!text.writes_fields_as_read());
        assert_eq!(
            edited(&text, &[("x-dup", Some("2")), ("X-Cache", Some("HIT"))]),
            "Server: origin\r\nx-dup: 2\r\nX-Cache: HIT\r\n"
        );
    }

    #[test]
    fn an_edit_name_reads_back_whole_in_place_or_not() {
        assert!(std::mem::size_of::<EditName>() <= std::mem::size_of::<Bytes>());
        for len in [0, 1, SHORT_NAME - 1, SHORT_NAME, SHORT_NAME + 1, 300] {
            let name: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert_eq!(&*EditName::new(&name), &name[..]);
        }
        let long = "X-".to_string() + &"Long".repeat(20);
        let obj = object();
        assert_eq!(
            edited(&obj, &[(&long, Some("1")), ("x-dup", None)]),
            format!("Server: origin\r\nContent-Type: text/html\r\n{long}: 1\r\n")
        );
    }

    #[test]
    fn a_response_starts_with_no_edits_of_the_last_one() {
        let obj = object();
        // Each response's list goes back to the thread, emptied, and is
        // the next one's.
        assert_eq!(
            edited(&obj, &[("X-First", Some("1")), ("server", None)]),
            "X-Dup: 1\r\nContent-Type: text/html\r\nX-Dup: 2\r\nX-First: 1\r\n"
        );
        assert_eq!(
            edited(&obj, &[("X-Second", Some("2"))]),
            "Server: origin\r\nX-Dup: 1\r\nContent-Type: text/html\r\nX-Dup: 2\r\nX-Second: 2\r\n"
        );
        assert!(Resp::for_object(&obj, true).edit("x-first").is_none());
    }

    #[test]
    fn more_edits_than_fit_in_a_word_are_each_written_once() {
        let obj = object();
        let mut resp = Resp::for_object(&obj, true);
        for i in 0..70 {
            resp.set(&format!("X-{i}"), Some(Bytes::from(i.to_string())));
        }
        resp.set("X-Dup", Some(Bytes::from_static(b"one")));
        let mut out = Vec::new();
        resp.write_head(&obj, None, &mut out);
        let head = String::from_utf8(out).unwrap();
        for i in 0..70 {
            assert_eq!(
                head.matches(&format!("\r\nX-{i}: {i}\r\n")).count(),
                1,
                "{head}"
            );
        }
        assert_eq!(head.matches("X-Dup").count(), 1);
        // Set last, written last.
        assert!(head.ends_with("\r\nX-69: 69\r\nX-Dup: one\r\n"), "{head}");
    }

    #[test]
    fn accept_ranges_follows_the_object_unless_vcl_edits_it() {
        let obj = object_with(&[("Accept-Ranges", "bytes")]);
        let mut resp = Resp::for_object(&obj, true);
        resp.set("X-Cache", Some(Bytes::from_static(b"HIT")));
        assert!(resp.has_accept_ranges(&obj));
        resp.set("accept-ranges", None);
        assert!(!resp.has_accept_ranges(&obj));
        let obj = object();
        let mut resp = Resp::for_object(&obj, true);
        assert!(!resp.has_accept_ranges(&obj));
        resp.set("Accept-Ranges", Some(Bytes::from_static(b"bytes")));
        assert!(resp.has_accept_ranges(&obj));
    }
}
