//! The log query language of vsl-query(7): record selection
//! (`{level}taglist:prefix[field]`), numeric, string and regex operators,
//! `vxid` tests, `not`/`and`/`or` and parentheses, one query per line.
//! A query is true for a group of transactions when some record in it
//! satisfies the expression.

use crate::record::Record;
use crate::tags::Tag;
use regex::bytes::Regex;

/// One transaction as a query sees it.
pub struct View<'a> {
    pub vxid: u64,
    pub level: u32,
    pub records: &'a [Record],
}

/// A compiled query.
#[derive(Debug)]
pub struct Query {
    expr: Expr,
}

#[derive(Debug)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Test(Test),
    Vxid(Cmp, i64),
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Cmp::Eq => o == Equal,
            Cmp::Ne => o != Equal,
            Cmp::Lt => o == Less,
            Cmp::Le => o != Greater,
            Cmp::Gt => o == Greater,
            Cmp::Ge => o != Less,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Level {
    Exactly(u32),
    AtLeast(u32),
    AtMost(u32),
}

impl Level {
    fn admits(self, level: u32) -> bool {
        match self {
            Level::Exactly(n) => level == n,
            Level::AtLeast(n) => level >= n,
            Level::AtMost(n) => level <= n,
        }
    }
}

#[derive(Debug)]
struct Test {
    level: Option<Level>,
    tags: u128,
    prefix: Option<Vec<u8>>,
    field: Option<usize>,
    cond: Option<Cond>,
}

#[derive(Debug)]
enum Cond {
    Int(Cmp, i64),
    Float(Cmp, f64),
    StrEq(bool, Vec<u8>),
    Regex(bool, Regex),
}

/// A query that does not parse: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "query error at line {} column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for QueryError {}

impl Query {
    /// Compiles a query text: one query per line (joined by `or`), `#`
    /// comments, `\` line continuations.
    pub fn parse(text: &str) -> Result<Query, QueryError> {
        let joined = text.replace("\\\n", " ");
        let mut expr: Option<Expr> = None;
        for (i, line) in joined.lines().enumerate() {
            let line = strip_comment(line);
            if line.trim().is_empty() {
                continue;
            }
            let tokens = lex(line).map_err(|(message, column)| QueryError {
                message,
                line: i + 1,
                column,
            })?;
            let mut p = Parser { tokens, at: 0 };
            let e = p.or().and_then(|e| match p.peek() {
                None => Ok(e),
                Some(_) => Err(p.error("unexpected token")),
            });
            let e = e.map_err(|(message, column)| QueryError {
                message,
                line: i + 1,
                column,
            })?;
            expr = Some(match expr {
                None => e,
                Some(prev) => Expr::Or(Box::new(prev), Box::new(e)),
            });
        }
        match expr {
            Some(expr) => Ok(Query { expr }),
            None => Err(QueryError {
                message: "empty query".into(),
                line: 1,
                column: 1,
            }),
        }
    }

    /// Whether the group of transactions satisfies the query.
    pub fn matches(&self, group: &[View<'_>]) -> bool {
        eval(&self.expr, group)
    }
}

fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

fn eval(e: &Expr, group: &[View<'_>]) -> bool {
    match e {
        Expr::Or(a, b) => eval(a, group) || eval(b, group),
        Expr::And(a, b) => eval(a, group) && eval(b, group),
        Expr::Not(a) => !eval(a, group),
        Expr::Vxid(cmp, n) => group.iter().any(|t| cmp.holds((t.vxid as i64).cmp(n))),
        Expr::Test(t) => group.iter().any(|v| {
            t.level.is_none_or(|l| l.admits(v.level)) && v.records.iter().any(|r| test_record(t, r))
        }),
    }
}

fn test_record(t: &Test, r: &Record) -> bool {
    if t.tags & (1u128 << (r.tag as u8)) == 0 {
        return false;
    }
    let mut value: &[u8] = &r.payload;
    if let Some(prefix) = &t.prefix {
        if value.len() <= prefix.len()
            || !value[..prefix.len()].eq_ignore_ascii_case(prefix)
            || value[prefix.len()] != b':'
        {
            return false;
        }
        value = trim_start(&value[prefix.len() + 1..]);
    }
    if let Some(n) = t.field {
        match value
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .nth(n - 1)
        {
            Some(f) => value = f,
            None => return false,
        }
    }
    match &t.cond {
        None => true,
        Some(Cond::Int(cmp, n)) => match number(value) {
            Some(v) => cmp.holds((v.trunc() as i64).cmp(n)),
            None => false,
        },
        Some(Cond::Float(cmp, n)) => match number(value) {
            Some(v) => v.partial_cmp(n).is_some_and(|o| cmp.holds(o)),
            None => false,
        },
        Some(Cond::StrEq(eq, s)) => (value == s.as_slice()) == *eq,
        Some(Cond::Regex(pos, re)) => re.is_match(value) == *pos,
    }
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn number(b: &[u8]) -> Option<f64> {
    std::str::from_utf8(b).ok()?.trim().parse::<f64>().ok()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Op(&'static str),
    Punct(char),
}

fn lex(line: &str) -> Result<Vec<(Tok, usize)>, (String, usize)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let col = i + 1;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let two = if i + 1 < b.len() {
            &b[i..i + 2]
        } else {
            &b[i..]
        };
        let op = match two {
            b"==" => Some("=="),
            b"!=" => Some("!="),
            b"<=" => Some("<="),
            b">=" => Some(">="),
            b"!~" => Some("!~"),
            _ => None,
        };
        if let Some(op) = op {
            out.push((Tok::Op(op), col));
            i += 2;
            continue;
        }
        match c {
            b'<' | b'>' | b'~' => {
                out.push((
                    Tok::Op(match c {
                        b'<' => "<",
                        b'>' => ">",
                        _ => "~",
                    }),
                    col,
                ));
                i += 1;
            }
            b'(' | b')' | b'{' | b'}' | b'[' | b']' | b':' | b',' => {
                out.push((Tok::Punct(c as char), col));
                i += 1;
            }
            b'"' | b'\'' => {
                let mut s = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(("unterminated string".into(), col)),
                        Some(&q) if q == c => break,
                        Some(b'\\') if i + 1 < b.len() => {
                            s.push(b[i + 1]);
                            i += 2;
                        }
                        Some(&x) => {
                            s.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
                out.push((Tok::Quoted(String::from_utf8_lossy(&s).into_owned()), col));
            }
            c if is_word(c) => {
                let start = i;
                while i < b.len() && is_word(b[i]) {
                    i += 1;
                }
                out.push((Tok::Word(line[start..i].to_string()), col));
            }
            _ => return Err((format!("unexpected character '{}'", c as char), col)),
        }
    }
    Ok(out)
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'_' | b'.' | b'*')
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    at: usize,
}

type PResult<T> = Result<T, (String, usize)>;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn column(&self) -> usize {
        self.tokens
            .get(self.at)
            .map(|(_, c)| *c)
            .or_else(|| self.tokens.last().map(|(_, c)| c + 1))
            .unwrap_or(1)
    }

    fn error(&self, msg: &str) -> (String, usize) {
        (msg.to_string(), self.column())
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).map(|(t, _)| t.clone());
        self.at += 1;
        t
    }

    fn keyword(&mut self, kw: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Word(w)) if w == kw) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> PResult<Expr> {
        let mut e = self.and()?;
        while self.keyword("or") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut e = self.not()?;
        while self.keyword("and") {
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> PResult<Expr> {
        if self.keyword("not") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        if self.punct('(') {
            let e = self.or()?;
            if !self.punct(')') {
                return Err(self.error("expected ')'"));
            }
            return Ok(e);
        }
        if self.keyword("vxid") {
            let cmp = match self.next() {
                Some(Tok::Op(op)) => numeric_op(op).ok_or_else(|| {
                    self.at -= 1;
                    self.error("vxid takes a numeric operator")
                })?,
                _ => {
                    self.at -= 1;
                    return Err(self.error("vxid takes a numeric operator"));
                }
            };
            let n = match self.next() {
                Some(Tok::Word(w) | Tok::Quoted(w)) => w.parse::<i64>().ok(),
                _ => None,
            };
            return match n {
                Some(n) => Ok(Expr::Vxid(cmp, n)),
                None => {
                    self.at -= 1;
                    Err(self.error("vxid compares with an integer"))
                }
            };
        }
        self.test().map(Expr::Test)
    }

    fn test(&mut self) -> PResult<Test> {
        let level = if self.punct('{') {
            let level = match self.next() {
                Some(Tok::Word(w)) => parse_level(&w),
                _ => None,
            };
            let Some(level) = level else {
                self.at -= 1;
                return Err(self.error("expected a level like {2}, {2+} or {2-}"));
            };
            if !self.punct('}') {
                return Err(self.error("expected '}'"));
            }
            Some(level)
        } else {
            None
        };
        let mut tags = 0u128;
        loop {
            let col = self.column();
            let name = match self.next() {
                Some(Tok::Word(w)) => w,
                _ => return Err(("expected a tag name".into(), col)),
            };
            let found = if name.contains('*') {
                if name.len() > 1 && name[1..name.len() - 1].contains('*') {
                    return Err(("a tag glob has '*' only at its start or end".into(), col));
                }
                Tag::matching(&name)
            } else {
                Tag::by_name(&name).into_iter().collect()
            };
            if found.is_empty() {
                return Err((format!("no tag matches \"{name}\""), col));
            }
            for t in found {
                tags |= 1u128 << (t as u8);
            }
            if !self.punct(',') {
                break;
            }
        }
        let prefix = if self.punct(':') {
            match self.next() {
                Some(Tok::Word(w) | Tok::Quoted(w)) => Some(w.into_bytes()),
                _ => {
                    self.at -= 1;
                    return Err(self.error("expected a record prefix after ':'"));
                }
            }
        } else {
            None
        };
        let field = if self.punct('[') {
            let n = match self.next() {
                Some(Tok::Word(w)) => w.parse::<usize>().ok().filter(|&n| n > 0),
                _ => None,
            };
            let Some(n) = n else {
                self.at -= 1;
                return Err(self.error("expected a field number from 1"));
            };
            if !self.punct(']') {
                return Err(self.error("expected ']'"));
            }
            Some(n)
        } else {
            None
        };
        let cond = match self.peek().cloned() {
            Some(Tok::Op(op)) => {
                self.at += 1;
                Some(self.condition(op)?)
            }
            Some(Tok::Word(w)) if w == "eq" || w == "ne" => {
                self.at += 1;
                let s = self.operand()?;
                Some(Cond::StrEq(w == "eq", s.into_bytes()))
            }
            _ => None,
        };
        Ok(Test {
            level,
            tags,
            prefix,
            field,
            cond,
        })
    }

    fn operand(&mut self) -> PResult<String> {
        match self.next() {
            Some(Tok::Word(w) | Tok::Quoted(w)) => Ok(w),
            _ => {
                self.at -= 1;
                Err(self.error("expected an operand"))
            }
        }
    }

    fn condition(&mut self, op: &'static str) -> PResult<Cond> {
        let col = self.column();
        let operand = self.operand()?;
        if op == "~" || op == "!~" {
            let re = Regex::new(&operand).map_err(|e| (format!("bad regex: {e}"), col))?;
            return Ok(Cond::Regex(op == "~", re));
        }
        let cmp = numeric_op(op).ok_or_else(|| (format!("unknown operator {op}"), col))?;
        if operand.contains(['.', 'e', 'E']) {
            operand
                .parse::<f64>()
                .map(|f| Cond::Float(cmp, f))
                .map_err(|_| (format!("\"{operand}\" is not a number"), col))
        } else {
            operand
                .parse::<i64>()
                .map(|n| Cond::Int(cmp, n))
                .map_err(|_| (format!("\"{operand}\" is not a number"), col))
        }
    }
}

fn numeric_op(op: &str) -> Option<Cmp> {
    Some(match op {
        "==" => Cmp::Eq,
        "!=" => Cmp::Ne,
        "<" => Cmp::Lt,
        "<=" => Cmp::Le,
        ">" => Cmp::Gt,
        ">=" => Cmp::Ge,
        _ => return None,
    })
}

fn parse_level(w: &str) -> Option<Level> {
    if let Some(n) = w.strip_suffix('+') {
        n.parse().ok().map(Level::AtLeast)
    } else if let Some(n) = w.strip_suffix('-') {
        n.parse().ok().map(Level::AtMost)
    } else {
        w.parse().ok().map(Level::Exactly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Side;

    fn rec(tag: Tag, p: &str) -> Record {
        Record::new(1, tag, Side::Client, p.as_bytes())
    }

    fn matches(q: &str, records: &[Record]) -> bool {
        let query = Query::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        query.matches(&[View {
            vxid: 1,
            level: 1,
            records,
        }])
    }

    fn request() -> Vec<Record> {
        vec![
            rec(Tag::ReqURL, "/foo"),
            rec(Tag::ReqHeader, "Host: example.com"),
            rec(Tag::ReqHeader, "User-Agent: Mozilla iPod"),
            rec(Tag::RespStatus, "304"),
            rec(Tag::Timestamp, "Resp: 1700000000.100000 1.250000 0.000100"),
        ]
    }

    #[test]
    fn selection_and_operators() {
        let r = request();
        assert!(matches("ReqURL eq \"/foo\"", &r));
        assert!(!matches("ReqURL ne '/foo'", &r));
        assert!(matches("ReqHeader:host", &r));
        assert!(!matches("ReqHeader:cookie", &r));
        assert!(matches("not ReqHeader:cookie", &r));
        assert!(matches("ReqHeader:user-agent ~ \"iPod\"", &r));
        assert!(matches("ReqHeader:Host eq example.com", &r));
        assert!(matches(
            "RespStatus == 304 and not ReqHeader:if-modified-since",
            &r
        ));
        assert!(matches("Timestamp:Resp[2] > 1.0", &r));
        assert!(!matches("Timestamp:Resp[2] > 1.5", &r));
        assert!(matches("Timestamp:Resp[2] >= 1", &r));
        assert!(
            !matches("Timestamp:Resp[2] > 1", &r),
            "integer compares the integral part"
        );
        assert!(matches("Resp* >= 300", &r));
        assert!(matches("*Status < 400 or ReqURL !~ foo", &r));
        assert!(!matches("RespStatus != 304", &r));
        assert!(matches("Timestamp[1] eq \"Resp:\"", &r));
        assert!(!matches("Timestamp[9]", &r));
        assert!(matches("vxid == 1", &r));
        assert!(!matches("vxid > 1", &r));
    }

    #[test]
    fn the_seed_query() {
        let q = Query::parse("(*Error) or (BerespStatus >= 500)").unwrap();
        let ok = [rec(Tag::BerespStatus, "200")];
        let bad = [rec(Tag::BerespStatus, "503")];
        let err = [rec(Tag::FetchError, "backend write error")];
        let view = |r| {
            [View {
                vxid: 2,
                level: 1,
                records: r,
            }]
        };
        assert!(!q.matches(&view(&ok)));
        assert!(q.matches(&view(&bad)));
        assert!(q.matches(&view(&err)));
    }

    #[test]
    fn levels_and_lines() {
        let top = [rec(Tag::RespStatus, "200")];
        let child = [rec(Tag::BerespStatus, "503")];
        let group = [
            View {
                vxid: 1,
                level: 1,
                records: &top,
            },
            View {
                vxid: 2,
                level: 2,
                records: &child,
            },
        ];
        let q = |s: &str| Query::parse(s).unwrap().matches(&group);
        assert!(q("{2}BerespStatus >= 500"));
        assert!(!q("{1}BerespStatus >= 500"));
        assert!(q("{2+}BerespStatus"));
        assert!(!q("{1-}BerespStatus"));
        assert!(q("# errors\nRespStatus == 404\n\nBerespStatus \\\n >= 500"));
    }

    #[test]
    fn errors_name_the_column() {
        let e = Query::parse("ReqURL ~ \"(\"").unwrap_err();
        assert_eq!(e.column, 10);
        let e = Query::parse("NoSuchTag").unwrap_err();
        assert!(e.message.contains("NoSuchTag"), "{e}");
        let e = Query::parse("ReqURL == abc").unwrap_err();
        assert!(e.message.contains("not a number"));
        assert!(Query::parse("(ReqURL").is_err());
        assert!(Query::parse("ReqURL and").is_err());
        assert!(Query::parse("").is_err());
        assert!(Query::parse("{x}ReqURL").is_err());
    }
}
