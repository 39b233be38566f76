//! Ban expressions: `<field> <operator> <arg> [&& <field> <oper> <arg> …]`
//! as the `ban` CLI command, `ban()` and `std.ban()` take them, parsed once
//! into tests with compiled regexes and normalised spec text, and evaluated
//! against an object (and, for `req.*` fields, the request looking it up).

use crate::object::Object;
use lacquer_core::regex::{Regex, RegexError};
use lacquer_http::Headers;
use std::fmt::Write as _;

/// A field a ban condition reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    ReqUrl,
    /// `req.http.<name>`, the name lower-cased for lookup.
    ReqHttp(String),
    ObjStatus,
    /// `obj.http.<name>`, the name lower-cased for lookup.
    ObjHttp(String),
    ObjTtl,
    ObjAge,
    ObjGrace,
    ObjKeep,
}

impl Field {
    fn is_req(&self) -> bool {
        matches!(self, Field::ReqUrl | Field::ReqHttp(_))
    }

    fn is_duration(&self) -> bool {
        matches!(
            self,
            Field::ObjTtl | Field::ObjAge | Field::ObjGrace | Field::ObjKeep
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Match,
    NoMatch,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "~" => Op::Match,
            "!~" => Op::NoMatch,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
enum Arg {
    Str(Vec<u8>),
    Regex(Regex),
    /// Seconds.
    Duration(f64),
}

/// One condition.
#[derive(Debug, Clone)]
struct Test {
    field: Field,
    op: Op,
    arg: Arg,
}

/// A parsed ban: every condition must hold for an object to be banned.
#[derive(Debug, Clone)]
pub struct BanSpec {
    tests: Vec<Test>,
    text: String,
}

/// The request a lookup is made for, as bans see it.
#[derive(Clone, Copy)]
pub struct BanReq<'a> {
    pub url: &'a [u8],
    pub headers: &'a Headers,
}

impl BanSpec {
    /// Parses the arguments of the `ban` command, already split into words.
    pub fn parse(args: &[&str]) -> Result<BanSpec, String> {
        if args.len() < 3 {
            return Err("Too few parameters".into());
        }
        if args.len() % 4 != 3 {
            return Err("Wrong number of arguments".into());
        }
        let mut tests = Vec::new();
        let mut text = String::new();
        for (i, cond) in args.chunks(4).enumerate() {
            if i > 0 {
                text.push_str(" && ");
            }
            let test = parse_test(cond[0], cond[1], cond[2], &mut text)?;
            tests.push(test);
            if let Some(&and) = cond.get(3) {
                if and != "&&" {
                    return Err(format!("Found \"{and}\" expected &&"));
                }
            }
        }
        Ok(BanSpec { tests, text })
    }

    /// Parses a ban given as one string (`ban()`, `std.ban()`): words split
    /// at white space, with `"…"` quoting a word that contains some.
    pub fn parse_str(s: &str) -> Result<BanSpec, String> {
        let words = split_words(s)?;
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        BanSpec::parse(&refs)
    }

    /// The specification as `ban.list` shows it, durations normalised.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether any condition reads the request, so that only lookups can
    /// test it.
    pub fn uses_req(&self) -> bool {
        self.tests.iter().any(|t| t.field.is_req())
    }

    /// Whether the ban holds for an object. `ban_time` is when the ban was
    /// issued (durations are measured then). Conditions on `req.*` never
    /// hold without a request. `tests` counts conditions evaluated.
    pub fn matches(
        &self,
        obj: &Object,
        req: Option<BanReq<'_>>,
        ban_time: f64,
        tests: &mut u64,
    ) -> bool {
        self.tests.iter().all(|t| {
            *tests += 1;
            t.holds(obj, req, ban_time)
        })
    }
}

impl Test {
    fn holds(&self, obj: &Object, req: Option<BanReq<'_>>, ban_time: f64) -> bool {
        let status;
        let field;
        let value: Option<&[u8]> = match &self.field {
            Field::ReqUrl => match req {
                Some(r) => Some(r.url),
                None => return false,
            },
            Field::ReqHttp(name) => match req {
                Some(r) => r.headers.get(name).map(|v| &v[..]),
                None => return false,
            },
            Field::ObjStatus => {
                status = obj.status().to_string();
                Some(status.as_bytes())
            }
            Field::ObjHttp(name) => {
                field = obj.header(name);
                field.as_deref()
            }
            Field::ObjTtl | Field::ObjAge | Field::ObjGrace | Field::ObjKeep => {
                let t = obj.timers();
                let v = match self.field {
                    Field::ObjTtl => t.t_origin + t.ttl - ban_time,
                    Field::ObjAge => ban_time - t.t_origin,
                    Field::ObjGrace => t.grace,
                    _ => t.keep,
                };
                let Arg::Duration(arg) = self.arg else {
                    return false;
                };
                return match self.op {
                    Op::Eq => v == arg,
                    Op::Ne => v != arg,
                    Op::Gt => v > arg,
                    Op::Ge => v >= arg,
                    Op::Lt => v < arg,
                    Op::Le => v <= arg,
                    Op::Match | Op::NoMatch => false,
                };
            }
        };
        // An absent header equals nothing and matches nothing.
        match (&self.arg, self.op) {
            (Arg::Str(s), Op::Eq) => value == Some(&s[..]),
            (Arg::Str(s), Op::Ne) => value != Some(&s[..]),
            (Arg::Regex(re), Op::Match) => value.is_some_and(|v| re.is_match(v)),
            (Arg::Regex(re), Op::NoMatch) => !value.is_some_and(|v| re.is_match(v)),
            _ => false,
        }
    }
}

fn parse_field(name: &str) -> Result<Field, String> {
    let unknown = || format!("Unknown or unsupported field \"{name}\"");
    let header = |h: &str| {
        if !h.is_empty() && h.bytes().all(lacquer_http::headers::is_token_byte) {
            Ok(h.to_ascii_lowercase())
        } else {
            Err(unknown())
        }
    };
    Ok(match name {
        "req.url" => Field::ReqUrl,
        "obj.status" => Field::ObjStatus,
        "obj.ttl" => Field::ObjTtl,
        "obj.age" => Field::ObjAge,
        "obj.grace" => Field::ObjGrace,
        "obj.keep" => Field::ObjKeep,
        _ => {
            if let Some(h) = name.strip_prefix("req.http.") {
                Field::ReqHttp(header(h)?)
            } else if let Some(h) = name.strip_prefix("obj.http.") {
                Field::ObjHttp(header(h)?)
            } else {
                return Err(unknown());
            }
        }
    })
}

fn parse_test(field: &str, op: &str, arg: &str, text: &mut String) -> Result<Test, String> {
    let f = parse_field(field)?;
    let parsed = Op::parse(op);
    if f.is_duration() {
        let op = match parsed {
            Some(o) if !matches!(o, Op::Match | Op::NoMatch) => o,
            _ => {
                return Err(format!(
                    "expected conditional (==, !=, >, >=, < or <=) got \"{op}\""
                ))
            }
        };
        let secs = parse_ban_duration(arg)
            .ok_or_else(|| format!("expected duration <n.nn>[ms|s|m|h|d|w|y] got \"{arg}\""))?;
        let _ = write!(text, "{field} {} {}", op_text(op), format_duration(secs));
        return Ok(Test {
            field: f,
            op,
            arg: Arg::Duration(secs),
        });
    }
    let op = match parsed {
        Some(o @ (Op::Eq | Op::Ne | Op::Match | Op::NoMatch)) => o,
        _ => {
            return Err(format!(
                "expected conditional (==, !=, ~ or !~) got \"{op}\""
            ))
        }
    };
    let arg_value = match op {
        Op::Match | Op::NoMatch => {
            Arg::Regex(lacquer_core::regex::compile(arg).map_err(|e| match e {
                RegexError::Syntax(s) => format!("Regex compile error: {s}"),
            })?)
        }
        _ => Arg::Str(arg.as_bytes().to_vec()),
    };
    let _ = write!(text, "{field} {} {arg}", op_text(op));
    Ok(Test {
        field: f,
        op,
        arg: arg_value,
    })
}

fn op_text(op: Op) -> &'static str {
    match op {
        Op::Eq => "==",
        Op::Ne => "!=",
        Op::Match => "~",
        Op::NoMatch => "!~",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Lt => "<",
        Op::Le => "<=",
    }
}

/// A VCL duration with its unit required: `10s`, `1.5m`, `-1h`.
fn parse_ban_duration(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| c.is_ascii_alphabetic())
        .filter(|&i| i > 0)?;
    let (num, unit) = s.split_at(split);
    if !num
        .bytes()
        .enumerate()
        .all(|(i, b)| b.is_ascii_digit() || b == b'.' || (i == 0 && b == b'-'))
    {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        "y" => 365.0 * 86400.0,
        _ => return None,
    };
    let v = n * scale;
    v.is_finite().then_some(v)
}

/// Prints a duration in the largest unit that shows it whole, at
/// millisecond precision: `90s`, `1w`, `500ms`, `1.500s`.
fn format_duration(secs: f64) -> String {
    let ms = (secs * 1000.0).trunc() as i64;
    if ms == 0 {
        return "0s".into();
    }
    if ms % 1000 != 0 {
        return if ms.abs() < 1000 {
            format!("{ms}ms")
        } else {
            format!("{:.3}s", ms as f64 / 1000.0)
        };
    }
    let s = ms / 1000;
    for (unit, size) in [
        ("y", 365 * 86400),
        ("w", 7 * 86400),
        ("d", 86400),
        ("h", 3600),
        ("m", 60),
    ] {
        if s % size == 0 {
            return format!("{}{unit}", s / size);
        }
    }
    format!("{s}s")
}

/// Splits a ban string into words: white space separates, `"…"` quotes
/// (with `\"` and `\\` inside).
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Ok(words);
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("Unterminated quoted string in ban".into()),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c @ ('"' | '\\')) => word.push(c),
                        Some(c) => {
                            word.push('\\');
                            word.push(c);
                        }
                        None => return Err("Unterminated quoted string in ban".into()),
                    },
                    Some(c) => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Body, ObjKind, ObjectInit, Timers};
    use bytes::Bytes;

    fn obj(status: u16, headers: &[(&str, &str)], t_origin: f64, ttl: f64) -> Object {
        let mut h = Headers::new();
        for (n, v) in headers {
            h.append(
                Bytes::copy_from_slice(n.as_bytes()),
                Bytes::copy_from_slice(v.as_bytes()),
            );
        }
        Object::new(ObjectInit {
            store: None,
            xid: 1,
            kind: ObjKind::Normal,
            status,
            head: Bytes::new().into(),
            headers: h,
            body: Body::complete(Vec::new()),
            vary: None,
            timers: Timers {
                t_origin,
                ttl,
                grace: 10.0,
                keep: 0.0,
            },
        })
    }

    fn check(spec: &str, o: &Object, url: &str, req_headers: &[(&str, &str)]) -> bool {
        let mut h = Headers::new();
        for (n, v) in req_headers {
            h.append(
                Bytes::copy_from_slice(n.as_bytes()),
                Bytes::copy_from_slice(v.as_bytes()),
            );
        }
        let spec = BanSpec::parse_str(spec).unwrap();
        let req = BanReq {
            url: url.as_bytes(),
            headers: &h,
        };
        spec.matches(o, Some(req), 1000.0, &mut 0)
    }

    #[test]
    fn conditions_and_conjunctions() {
        let o = obj(
            200,
            &[("Content-Type", "text/html"), ("X-Tag", "a b")],
            900.0,
            300.0,
        );
        assert!(check("req.url ~ ^/news", &o, "/news/1", &[]));
        assert!(!check("req.url == /news", &o, "/news/1", &[]));
        assert!(check("obj.status == 200", &o, "/", &[]));
        assert!(check("obj.status != 404", &o, "/", &[]));
        assert!(check("obj.http.content-type ~ (?i)HTML", &o, "/", &[]));
        assert!(check("obj.http.x-tag == \"a b\"", &o, "/", &[]));
        assert!(check(
            "req.http.host ~ ^(www\\.)?example\\.com$ && obj.http.X-Tag ~ a\\sb",
            &o,
            "/",
            &[("Host", "www.example.com")]
        ));
        assert!(!check(
            "req.http.host == a && obj.status == 200",
            &o,
            "/",
            &[]
        ));
        // Absent headers: == and ~ never hold, != and !~ always do.
        assert!(!check("obj.http.absent == x", &o, "/", &[]));
        assert!(!check("obj.http.absent ~ .", &o, "/", &[]));
        assert!(check("obj.http.absent != x", &o, "/", &[]));
        assert!(check("obj.http.absent !~ .", &o, "/", &[]));
    }

    #[test]
    fn durations_are_measured_when_the_ban_is_issued() {
        // Made at 900 with ttl 300: at the ban (1000) ttl left is 200, age 100.
        let o = obj(200, &[], 900.0, 300.0);
        assert!(check("obj.ttl > 150s", &o, "/", &[]));
        assert!(!check("obj.ttl > 250s", &o, "/", &[]));
        assert!(check("obj.age >= 100s", &o, "/", &[]));
        assert!(check("obj.age < 2m", &o, "/", &[]));
        assert!(check("obj.grace == 10s", &o, "/", &[]));
        assert!(check("obj.keep <= 0s", &o, "/", &[]));
    }

    #[test]
    fn spec_text_is_normalised() {
        let text = |s: &str| BanSpec::parse_str(s).unwrap().text().to_string();
        assert_eq!(text("obj.age < 1.5m"), "obj.age < 90s");
        assert_eq!(text("obj.ttl == 7d"), "obj.ttl == 1w");
        assert_eq!(text("obj.ttl == 365d"), "obj.ttl == 1y");
        assert_eq!(text("obj.ttl == 0.5s"), "obj.ttl == 500ms");
        assert_eq!(text("obj.ttl == 1.5s"), "obj.ttl == 1.500s");
        assert_eq!(text("obj.ttl == 120m"), "obj.ttl == 2h");
        assert_eq!(text("obj.ttl == 0.25ms"), "obj.ttl == 0s");
        assert_eq!(text("obj.keep > -1s"), "obj.keep > -1s");
        assert_eq!(
            text("req.url   ==  /a   &&  obj.http.X-Y !~ b"),
            "req.url == /a && obj.http.X-Y !~ b"
        );
        assert!(BanSpec::parse_str("req.url == /a").unwrap().uses_req());
        assert!(!BanSpec::parse_str("obj.status == 1").unwrap().uses_req());
    }

    #[test]
    fn errors_read_as_varnish_words_them() {
        let err = |s: &str| BanSpec::parse_str(s).unwrap_err();
        assert_eq!(err("req.url"), "Too few parameters");
        assert_eq!(err("req.url == a &&"), "Wrong number of arguments");
        assert_eq!(err("foo == 1"), "Unknown or unsupported field \"foo\"");
        assert_eq!(
            err("obj.http == 1"),
            "Unknown or unsupported field \"obj.http\""
        );
        assert_eq!(
            err("req.http. == 1"),
            "Unknown or unsupported field \"req.http.\""
        );
        assert_eq!(
            err("obj.status < 3"),
            "expected conditional (==, !=, ~ or !~) got \"<\""
        );
        assert_eq!(
            err("obj.ttl ~ x"),
            "expected conditional (==, !=, >, >=, < or <=) got \"~\""
        );
        assert_eq!(
            err("obj.ttl == 1x"),
            "expected duration <n.nn>[ms|s|m|h|d|w|y] got \"1x\""
        );
        assert_eq!(
            err("obj.ttl == 10"),
            "expected duration <n.nn>[ms|s|m|h|d|w|y] got \"10\""
        );
        assert_eq!(
            err("req.url == a || obj.status == 1"),
            "Found \"||\" expected &&"
        );
        assert!(err("req.url ~ (").starts_with("Regex compile error: "));
        assert!(BanSpec::parse_str("req.url ~ (?<=a)b").is_ok());
        assert!(err("req.url ~ (?<=a+)b").contains("Regex compile error"));
        assert_eq!(err("req.url == \"a"), "Unterminated quoted string in ban");
    }
}
