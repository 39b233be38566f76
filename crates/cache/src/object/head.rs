//! An object's stored head read back: its status line and fields
//! written out as text, read one by one or by name, in place.

use super::{FieldValue, Object};
use crate::packed::{self, Packed};
use bytes::Bytes;
use lacquer_http::headers::name_eq;
use lacquer_http::Headers;

impl Object {
    /// The head as kept ([`crate::packed`]).
    #[inline]
    fn packed(&self) -> Packed<'_> {
        Packed(self.head.as_slice())
    }

    /// The reason phrase of the status line it was stored with (empty
    /// for a marker).
    #[inline]
    pub fn reason(&self) -> &[u8] {
        self.packed().reason(self.status())
    }

    /// Writes the stored header lines, each ending in CRLF, without the
    /// status line.
    #[inline]
    pub fn write_fields(&self, out: &mut Vec<u8>) {
        self.packed().write_fields(out);
    }

    /// Writes the stored header lines as [`Object::write_fields`] does,
    /// then calls `then` with `out`, where the lines start in it, and
    /// where each ends (past its LF) counted from there: known without a
    /// search for an object written before by this thread.
    pub fn write_fields_then<R>(
        &self,
        out: &mut Vec<u8>,
        then: impl FnOnce(&mut Vec<u8>, usize, &[u32]) -> R,
    ) -> R {
        self.packed().write_fields_then(out, then)
    }

    /// Whether [`Object::write_fields`] writes each field as exactly
    /// `Name: value` and CRLF, as [`Object::fields`] reads them (a head
    /// kept as its text, because it would not come back byte for byte
    /// from its fields, writes its lines as they came).
    #[inline]
    pub fn writes_fields_as_read(&self) -> bool {
        self.packed().fields_are_packed()
    }

    /// Writes the status line and the stored headers, each line ending in
    /// CRLF, without the blank line that ends a head.
    #[inline]
    pub fn write_head(&self, out: &mut Vec<u8>) {
        self.packed().write(self.status(), out);
    }

    /// The status line and the stored headers as [`Object::write_head`]
    /// writes them.
    pub fn head_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text_len_guess());
        self.write_head(&mut out);
        out
    }

    /// Room for the head written out: a packed head's text is commonly
    /// two to seven times its size (a date's 6 bytes are 37 of text).
    fn text_len_guess(&self) -> usize {
        self.head.len() * 4 + 64
    }

    /// The bytes of the head as kept (packed).
    #[inline]
    pub fn head_len(&self) -> usize {
        self.head.len()
    }

    /// What the store is charged for the head: its bytes when they have
    /// an allocation of their own; none when they are in the object,
    /// whose memory [`OBJECT_OVERHEAD`] counts.
    #[inline]
    pub fn head_charge(&self) -> usize {
        match &self.head {
            packed::Kept::Heap(b) => b.len(),
            packed::Kept::Inline { .. } => 0,
        }
    }

    /// The stored headers, as a list that shares one copy of their lines
    /// (the head itself is packed, and never shared: see
    /// [`ObjectInit::head`]).
    pub fn headers(&self) -> Headers {
        let mut lines = Vec::with_capacity(self.text_len_guess());
        self.write_fields(&mut lines);
        let copy = Bytes::from(lines);
        let mut out = Headers::with_capacity(8);
        // The lines are `Name: value` and CRLF, as the fields come.
        let mut at = 0;
        for (name, value) in self.fields() {
            let value_at = at + name.len() + 2;
            let value_len = value.bytes().len();
            out.push_raw(lacquer_http::headers::Header {
                name: copy.slice(at..at + name.len()),
                value: copy.slice(value_at..value_at + value_len),
            });
            at = value_at + value_len + 2;
        }
        out
    }

    /// A stored header's first value (a copy: see [`Object::headers`]).
    pub fn header(&self, name: &str) -> Option<Bytes> {
        self.header_ref(name).map(FieldValue::to_bytes)
    }

    /// A stored header's first value, read in place.
    pub fn header_ref(&self, name: &str) -> Option<FieldValue<'_>> {
        self.fields()
            .find(|(n, _)| name_eq(n, name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// Every value of a stored header, read in place.
    pub fn header_refs<'a>(&'a self, name: &'a str) -> impl Iterator<Item = FieldValue<'a>> + 'a {
        self.fields()
            .filter(move |(n, _)| name_eq(n, name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// Whether a stored header is there.
    pub fn has_header(&self, name: &str) -> bool {
        self.fields().any(|(n, _)| name_eq(n, name.as_bytes()))
    }

    /// The stored fields, name and value, in order, read in place.
    #[inline]
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], FieldValue<'_>)> {
        self.packed().fields()
    }
}
