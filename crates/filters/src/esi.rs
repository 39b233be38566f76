//! The ESI parser: reads a whole fetched body once and produces the
//! program that delivery runs — ranges of the body to send as they are,
//! and includes to run as sub-requests. What it understands is what
//! Varnish does: `<esi:include src=… [onerror="continue"]/>`,
//! `<esi:remove>…</esi:remove>`, `<esi:comment …/>`, `<!--esi … -->`;
//! ordinary comments and CDATA sections are left alone, and so is every
//! other element. Mistakes never stop the page: they are reported, the
//! offending tag is dropped and parsing goes on.

use std::ops::Range;

/// The `feature` flags that change how a body is parsed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Parse bodies that do not start with `<`.
    pub disable_xml_check: bool,
    /// Drop a UTF-8 byte order mark in front of the body.
    pub remove_bom: bool,
    /// Read `onerror="continue"` on includes.
    pub include_onerror: bool,
    /// Treat `https://` includes as `http://` instead of ignoring them.
    pub ignore_https: bool,
    /// Look for ESI inside the markup of other elements too, instead of
    /// skipping each one to its first `>` (its attributes, a lone `<`).
    pub ignore_other_elements: bool,
}

/// One include: the URL and Host its sub-request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// The path (and query) to request.
    pub url: Vec<u8>,
    /// The Host to request it from, when `src` named one.
    pub host: Option<Vec<u8>>,
    /// `onerror="continue"`: a failed include does not end the page.
    pub onerror_continue: bool,
}

/// A step of the delivery program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// These bytes of the body, as they are.
    Verbatim(Range<usize>),
    /// The body of a sub-request.
    Include(Include),
}

/// What delivery does with an ESI object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    pub segments: Vec<Segment>,
    /// For a page stored gzip'd: the compressed form of each verbatim
    /// segment, in order (see [`crate::splice::gzip_page`]).
    pub deflated: Vec<crate::splice::Deflated>,
}

impl Program {
    /// The number of includes.
    pub fn includes(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| matches!(s, Segment::Include(_)))
            .count()
    }
}

/// The result of parsing one body.
#[derive(Debug, Default)]
pub struct Parsed {
    /// `None` when the body was not processed (it is not XML).
    pub program: Option<Program>,
    /// Messages for the log (`ESI_xmlerror`), in order.
    pub notes: Vec<String>,
    /// How many of the notes are errors (for `MAIN.esi_errors`).
    pub errors: usize,
    /// How many are warnings (for `MAIN.esi_warnings`).
    pub warnings: usize,
}

/// The message logged for a body that is not processed.
pub const NOT_XML: &str =
    "WARN: No ESI processing, first char not '<'. (See feature esi_disable_xml_check)";

const BOM: &[u8] = b"\xef\xbb\xbf";

struct Parser<'a> {
    body: &'a [u8],
    base: &'a [u8],
    opts: &'a Options,
    out: Parsed,
    segments: Vec<Segment>,
}

/// Parses `body`, fetched for `base_url` (which relative includes are
/// resolved against).
pub fn parse(body: &[u8], base_url: &[u8], opts: &Options) -> Parsed {
    let mut start = 0;
    if opts.remove_bom && body.starts_with(BOM) {
        start = BOM.len();
    }
    if !opts.disable_xml_check {
        let first = body[start..].iter().find(|b| !b.is_ascii_whitespace());
        if first.is_some_and(|&b| b != b'<') {
            return Parsed {
                program: None,
                notes: vec![NOT_XML.to_string()],
                errors: 0,
                warnings: 0,
            };
        }
    }
    let mut p = Parser {
        body,
        base: base_url,
        opts,
        out: Parsed::default(),
        segments: Vec::new(),
    };
    p.scan_from(start);
    let mut out = p.out;
    out.program = Some(Program {
        segments: p.segments,
        deflated: Vec::new(),
    });
    out
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

fn starts_with_ci(hay: &[u8], at: usize, prefix: &[u8]) -> bool {
    hay.len() >= at + prefix.len() && hay[at..at + prefix.len()].eq_ignore_ascii_case(prefix)
}

/// A parsed start or end tag of the `esi:` namespace.
struct Tag {
    name: Vec<u8>,
    attrs: Vec<(Vec<u8>, Vec<u8>)>,
    empty: bool,
    /// Offset just past the closing `>`.
    end: usize,
}

impl Parser<'_> {
    fn verbatim(&mut self, r: Range<usize>) {
        if r.is_empty() {
            return;
        }
        if let Some(Segment::Verbatim(last)) = self.segments.last_mut() {
            if last.end == r.start {
                last.end = r.end;
                return;
            }
        }
        self.segments.push(Segment::Verbatim(r));
    }

    fn error(&mut self, at: usize, msg: &str) {
        self.out.errors += 1;
        self.out.notes.push(format!("ERR after {at} {msg}"));
    }

    fn warn(&mut self, at: usize, msg: &str) {
        self.out.warnings += 1;
        self.out.notes.push(format!("WARN after {at} {msg}"));
    }

    fn scan_from(&mut self, start: usize) {
        let body = self.body;
        let mut i = start;
        let mut copied = start;
        // Inside `<!--esi`: the next `-->` closes it.
        let mut in_esi_comment = false;
        // Where the next `-->` is, once looked for.
        let mut close_cache: Option<Option<usize>> = None;
        // Inside `<esi:remove>`: everything up to its end tag goes.
        let mut removing: Option<usize> = None;
        while i < body.len() {
            if let Some(from) = removing {
                // The end tag, passing over CDATA sections (where markup is
                // only text, `</esi:remove>` too).
                let mut end = find_ci(body, b"</esi:remove", i);
                let mut k = i;
                while let (Some(e), Some(cdata)) = (end, find(body, b"<![CDATA[", k)) {
                    if cdata > e {
                        break;
                    }
                    k = find(body, b"]]>", cdata + 9).map_or(body.len(), |c| c + 3);
                    end = find_ci(body, b"</esi:remove", k);
                }
                // ESI elements inside a removed part are errors (and go
                // with it).
                let mut j = i;
                while let Some(at) = find_ci(body, b"<esi:", j) {
                    if end.is_some_and(|e| at > e) {
                        break;
                    }
                    let name = self.tag(at + 1, false).map(|t| t.name).unwrap_or_default();
                    let name = String::from_utf8_lossy(&name).into_owned();
                    self.error(
                        at,
                        &format!("ESI 1.0 <esi:{name}> element nested in <esi:remove>"),
                    );
                    j = at + 5;
                }
                match end {
                    Some(at) => match self.tag(at + 1, true) {
                        Some(t) => {
                            i = t.end;
                            copied = i;
                            removing = None;
                        }
                        None => {
                            self.error(at, "ESI 1.0 unterminated </esi:remove> tag");
                            return;
                        }
                    },
                    None => {
                        self.error(from, "ESI 1.0 <esi:remove> not closed");
                        return;
                    }
                }
                continue;
            }
            let next_lt = find(body, b"<", i);
            let next_close = if in_esi_comment {
                // Searched again only once passed, so an unterminated
                // comment full of tags stays a linear scan.
                if close_cache.is_some_and(|c| c.is_some_and(|at| at < i)) {
                    close_cache = None;
                }
                *close_cache.get_or_insert_with(|| find(body, b"-->", i))
            } else {
                None
            };
            if let Some(close) = next_close {
                if next_lt.is_none_or(|lt| close < lt) {
                    self.verbatim(copied..close);
                    i = close + 3;
                    copied = i;
                    in_esi_comment = false;
                    close_cache = None;
                    continue;
                }
            }
            let Some(lt) = next_lt else { break };
            if body[lt..].starts_with(b"<!--esi") {
                if in_esi_comment {
                    self.error(lt, "ESI 1.0 Nested <!--esi element in <!--esi");
                }
                self.verbatim(copied..lt);
                i = lt + 7;
                copied = i;
                in_esi_comment = true;
            } else if body[lt..].starts_with(b"<!--") {
                // A comment is text, ESI inside it included.
                i = find(body, b"-->", lt + 4).map_or(body.len(), |e| e + 3);
            } else if body[lt..].starts_with(b"<![CDATA[") {
                i = find(body, b"]]>", lt + 9).map_or(body.len(), |e| e + 3);
            } else if starts_with_ci(body, lt, b"<esi:") || starts_with_ci(body, lt, b"</esi:") {
                let closing = body[lt + 1] == b'/';
                let Some(t) = self.tag(lt + 1, closing) else {
                    self.error(lt, "ESI 1.0 unterminated esi: tag");
                    break;
                };
                self.verbatim(copied..lt);
                i = t.end;
                copied = i;
                if closing {
                    if t.name.eq_ignore_ascii_case(b"remove") {
                        self.error(lt, "ESI 1.0 </esi:remove> without <esi:remove>");
                    } else if t.name.eq_ignore_ascii_case(b"include") {
                        self.error(lt, "ESI 1.0 </esi:include> illegal end-tag");
                    } else {
                        self.bogus(lt);
                    }
                    continue;
                }
                match t.name.to_ascii_lowercase().as_slice() {
                    b"include" => self.include(lt, &t),
                    b"remove" if t.empty => {}
                    b"remove" => removing = Some(lt),
                    b"comment" => {
                        if !t.empty {
                            self.error(lt, "ESI 1.0 <esi:comment> needs final '/'");
                        }
                    }
                    _ => self.bogus(lt),
                }
            } else if self.opts.ignore_other_elements {
                i = lt + 1;
            } else {
                // Another element: skipped whole, to its first `>`, so
                // that nothing in its attributes is taken for ESI.
                i = find(body, b">", lt + 1).map_or(body.len(), |e| e + 1);
            }
        }
        if in_esi_comment {
            self.error(body.len(), "ESI 1.0 unterminated <!--esi comment");
        }
        self.verbatim(copied..body.len());
    }

    /// An `esi:` element that is none of Varnish's.
    fn bogus(&mut self, at: usize) {
        self.error(at, "ESI 1.0 <esi:bogus> element");
    }

    /// Reads a tag whose name starts after `esi:` at `at` (just past the
    /// `<`, or `</` when `closing`).
    fn tag(&mut self, at: usize, closing: bool) -> Option<Tag> {
        let body = self.body;
        let mut i = at + if closing { 5 } else { 4 };
        let name_start = i;
        while i < body.len() && (body[i].is_ascii_alphanumeric() || body[i] == b'_') {
            i += 1;
        }
        let name = body[name_start..i].to_vec();
        let mut attrs = Vec::new();
        loop {
            while i < body.len() && body[i].is_ascii_whitespace() {
                i += 1;
            }
            match body.get(i)? {
                b'>' => {
                    return Some(Tag {
                        name,
                        attrs,
                        empty: false,
                        end: i + 1,
                    })
                }
                b'/' if body.get(i + 1) == Some(&b'>') => {
                    return Some(Tag {
                        name,
                        attrs,
                        empty: true,
                        end: i + 2,
                    })
                }
                _ => {}
            }
            let a0 = i;
            while i < body.len()
                && !body[i].is_ascii_whitespace()
                && !matches!(body[i], b'=' | b'>' | b'/')
            {
                i += 1;
            }
            let attr = body[a0..i].to_vec();
            if attr.is_empty() {
                // A stray `/` or `=`: step over it.
                i += 1;
                continue;
            }
            while i < body.len() && body[i].is_ascii_whitespace() {
                i += 1;
            }
            if body.get(i) != Some(&b'=') {
                attrs.push((attr, Vec::new()));
                continue;
            }
            i += 1;
            while i < body.len() && body[i].is_ascii_whitespace() {
                i += 1;
            }
            let quote = *body.get(i)?;
            let value = if quote == b'"' || quote == b'\'' {
                let end = i + 1 + body[i + 1..].iter().position(|&b| b == quote)?;
                let v = &body[i + 1..end];
                i = end + 1;
                v
            } else {
                let v0 = i;
                while i < body.len() && !body[i].is_ascii_whitespace() && body[i] != b'>' {
                    i += 1;
                }
                &body[v0..i]
            };
            attrs.push((attr, unescape(value)));
        }
    }

    fn include(&mut self, at: usize, t: &Tag) {
        if !t.empty {
            self.warn(at, "ESI 1.0 <esi:include> lacks final '/'");
        }
        let attr = |name: &[u8]| {
            t.attrs
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let Some(src) = attr(b"src") else {
            self.error(at, "ESI 1.0 <esi:include> lacks src attr");
            return;
        };
        let onerror_continue = self.opts.include_onerror
            && attr(b"onerror").is_some_and(|v| v.eq_ignore_ascii_case(b"continue"));
        let (url, host) = if let Some(rest) = strip_prefix_ci(&src, b"http://") {
            split_authority(rest)
        } else if let Some(rest) = strip_prefix_ci(&src, b"https://") {
            if !self.opts.ignore_https {
                self.warn(at, "ESI 1.0 <esi:include> with https:// ignored");
                return;
            }
            split_authority(rest)
        } else if src.starts_with(b"/") {
            (src, None)
        } else {
            (relative(self.base, &src), None)
        };
        if url.is_empty() {
            self.error(at, "ESI 1.0 <esi:include> has an empty src");
            return;
        }
        self.segments.push(Segment::Include(Include {
            url,
            host,
            onerror_continue,
        }));
    }
}

fn find_ci(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|i| i + from)
}

fn strip_prefix_ci<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    starts_with_ci(s, 0, prefix).then(|| &s[prefix.len()..])
}

/// `host/path` into a path (at least `/`) and a host.
fn split_authority(rest: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    match rest.iter().position(|&b| b == b'/') {
        Some(slash) => (rest[slash..].to_vec(), Some(rest[..slash].to_vec())),
        None => (b"/".to_vec(), Some(rest.to_vec())),
    }
}

/// A relative reference (an include's `src`, a `Location`) resolved
/// against the directory of the URL `base` (its query ignored).
pub fn relative(base: &[u8], src: &[u8]) -> Vec<u8> {
    let path_end = base
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(base.len());
    let dir = match base[..path_end].iter().rposition(|&b| b == b'/') {
        Some(slash) => &base[..=slash],
        None => b"/",
    };
    let mut url = dir.to_vec();
    url.extend_from_slice(src);
    url
}

/// The five XML entities in an attribute value.
fn unescape(v: &[u8]) -> Vec<u8> {
    const ENTITIES: &[(&[u8], u8)] = &[
        (b"&amp;", b'&'),
        (b"&lt;", b'<'),
        (b"&gt;", b'>'),
        (b"&quot;", b'"'),
        (b"&apos;", b'\''),
    ];
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    'outer: while i < v.len() {
        if v[i] == b'&' {
            for (name, ch) in ENTITIES {
                if v[i..].starts_with(name) {
                    out.push(*ch);
                    i += name.len();
                    continue 'outer;
                }
            }
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(body: &str, opts: &Options) -> (String, Vec<String>, Parsed) {
        let parsed = parse(body.as_bytes(), b"/dir/page?x=1", opts);
        let mut text = String::new();
        let mut incs = Vec::new();
        if let Some(p) = &parsed.program {
            for s in &p.segments {
                match s {
                    Segment::Verbatim(r) => text.push_str(&body[r.clone()]),
                    Segment::Include(i) => {
                        text.push('@');
                        let host = i.host.as_deref().map(String::from_utf8_lossy);
                        incs.push(format!(
                            "{}{}{}",
                            host.map(|h| format!("{h}|")).unwrap_or_default(),
                            String::from_utf8_lossy(&i.url),
                            if i.onerror_continue { " continue" } else { "" }
                        ));
                    }
                }
            }
        }
        (text, incs, parsed)
    }

    #[test]
    fn includes_resolve_absolute_relative_and_hosted_sources() {
        let o = Options::default();
        let (text, incs, p) = parse_text(
            "<p>a<esi:include src=\"/abs\"/>b<esi:include src='rel?q=1&amp;r=2' />c\
             <esi:include src=\"http://other.example/x/y\"/><esi:include src=\"http://bare\"/></p>",
            &o,
        );
        assert_eq!(text, "<p>a@b@c@@</p>");
        assert_eq!(
            incs,
            ["/abs", "/dir/rel?q=1&r=2", "other.example|/x/y", "bare|/"]
        );
        assert_eq!(p.errors, 0);
        assert_eq!(p.program.unwrap().includes(), 4);
    }

    #[test]
    fn remove_comment_and_esi_comments() {
        let o = Options::default();
        let (text, incs, p) = parse_text(
            "<a>1<esi:remove>gone<esi:include src=\"/no\"/></esi:remove>2\
             <esi:comment text=\"x\"/>3<!--esi 4<esi:include src=\"/yes\"/>5-->6\
             <!-- plain <esi:include src=\"/kept\"/> -->7<![CDATA[<esi:include src=\"/c\"/>]]></a>",
            &o,
        );
        assert_eq!(
            text,
            "<a>12\
             3 4@56\
             <!-- plain <esi:include src=\"/kept\"/> -->7<![CDATA[<esi:include src=\"/c\"/>]]></a>"
        );
        assert_eq!(incs, ["/yes"]);
        assert_eq!(p.errors, 1, "the include inside esi:remove: {:?}", p.notes);
        assert!(p.notes[0].contains("<esi:include> element nested in <esi:remove>"));
    }

    #[test]
    fn cdata_inside_a_removed_part_is_text() {
        let (out, _, p) = parse_text(
            "<a><esi:remove>x<![CDATA[</esi:remove>]]>y</esi:remove>b</a>",
            &Options::default(),
        );
        assert_eq!(out, "<a>b</a>");
        assert_eq!(p.errors, 0, "{:?}", p.notes);
    }

    #[test]
    fn not_xml_unless_the_check_is_disabled() {
        let p = parse(
            b"  text <esi:include src=\"/x\"/>",
            b"/",
            &Options::default(),
        );
        assert!(p.program.is_none());
        assert_eq!(p.notes, [NOT_XML]);
        let o = Options {
            disable_xml_check: true,
            ..Options::default()
        };
        let (text, incs, _) = parse_text("text <esi:include src=\"/x\"/>", &o);
        assert_eq!((text.as_str(), incs.len()), ("text @", 1));
        // Leading white space is allowed before the first `<`.
        let (text, _, _) = parse_text("\n <b/>", &Options::default());
        assert_eq!(text, "\n <b/>");
    }

    #[test]
    fn bom_is_dropped_only_with_the_feature() {
        let body = "\u{feff}<b>x</b>";
        assert!(parse(body.as_bytes(), b"/", &Options::default())
            .program
            .is_none());
        let o = Options {
            remove_bom: true,
            ..Options::default()
        };
        let (text, _, _) = parse_text(body, &o);
        assert_eq!(text, "<b>x</b>");
    }

    #[test]
    fn onerror_is_read_only_with_the_feature() {
        let body = "<esi:include src=\"/f\" onerror=\"continue\"/>";
        let (_, incs, _) = parse_text(body, &Options::default());
        assert_eq!(incs, ["/f"]);
        let o = Options {
            include_onerror: true,
            ..Options::default()
        };
        let (_, incs, _) = parse_text(body, &o);
        assert_eq!(incs, ["/f continue"]);
    }

    #[test]
    fn https_includes_are_ignored_unless_asked() {
        let body = "<esi:include src=\"https://h/p\"/>";
        let (_, incs, p) = parse_text(body, &Options::default());
        assert!(incs.is_empty());
        assert_eq!(p.warnings, 1);
        let o = Options {
            ignore_https: true,
            ..Options::default()
        };
        assert_eq!(parse_text(body, &o).1, ["h|/p"]);
    }

    #[test]
    fn mistakes_are_counted_and_never_stop_the_page() {
        let o = Options::default();
        let (text, incs, p) = parse_text(
            "<x>a<esi:include/>b<esi:bogus>c</esi:bogus>d<esi:include src=\"/i\">e</x>",
            &o,
        );
        assert_eq!(text, "<x>abcd@e</x>");
        assert_eq!(incs, ["/i"]);
        assert_eq!((p.errors, p.warnings), (3, 1), "{:?}", p.notes);
        assert!(p.notes[0].starts_with("ERR after 4 "));
        assert_eq!(
            p.notes[3],
            "WARN after 44 ESI 1.0 <esi:include> lacks final '/'"
        );
        let (_, _, p) = parse_text("<x><esi:include src=\"/i\"/></esi:include></x>", &o);
        assert_eq!(
            p.notes,
            ["ERR after 26 ESI 1.0 </esi:include> illegal end-tag"]
        );
        // Unterminated constructs end the parse; what came before stays.
        for body in [
            "<x>a<esi:include src=\"/i\"",
            "<x>a<esi:remove>b",
            "<x>a<!--esi b",
            "<x>a<esi:include src=\"/i",
        ] {
            let (text, _, p) = parse_text(body, &o);
            assert!(text.starts_with("<x>a"), "{body}: {text}");
            assert_eq!(p.errors, 1, "{body}");
        }
    }

    #[test]
    fn other_elements_are_skipped_whole_unless_ignored() {
        let body = "<p><a title=\"<esi:include src='/t'/>\">x</a> a < b <esi:include src=\"/l\"/>\
                    <img alt=\"x>y\"><esi:include src=\"/i\"/></p>";
        let (text, incs, _) = parse_text(body, &Options::default());
        assert_eq!(incs, ["/i"]);
        assert!(text.starts_with("<p><a title=\"<esi:include"), "{text}");
        let ignore = Options {
            ignore_other_elements: true,
            ..Options::default()
        };
        let (_, incs, p) = parse_text(body, &ignore);
        assert_eq!(incs, ["/t", "/l", "/i"]);
        assert_eq!(p.errors, 0);
        // Unknown esi: elements are errors either way.
        assert_eq!(parse_text("<x><esi:bogus/></x>", &ignore).2.errors, 1);
    }

    #[test]
    fn an_unterminated_esi_comment_full_of_tags_is_parsed_in_linear_time() {
        let mut body = b"<p><!--esi ".to_vec();
        for _ in 0..200_000 {
            body.extend_from_slice(b"<a>");
        }
        let started = std::time::Instant::now();
        let p = parse(&body, b"/", &Options::default());
        assert_eq!(p.errors, 1);
        // Quadratic rescanning would take minutes here.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let o = Options {
            disable_xml_check: true,
            ..Options::default()
        };
        let pieces: [&[u8]; 12] = [
            b"<",
            b"esi:",
            b"include",
            b" src=",
            b"\"",
            b"/",
            b">",
            b"<!--esi",
            b"-->",
            b"</esi:remove>",
            b"<esi:remove>",
            b"\xff",
        ];
        let mut seed = 7u64;
        for _ in 0..2000 {
            let mut body = Vec::new();
            for _ in 0..(seed % 12) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                body.extend_from_slice(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            let p = parse(&body, b"", &o);
            for s in p.program.unwrap().segments {
                if let Segment::Verbatim(r) = s {
                    assert!(r.end <= body.len());
                }
            }
        }
    }
}
