//! VCL 3.0 to VCL 4.1: `lacquer upgrade-vcl` rewrites a Varnish 3 program
//! (as old articles show them) into one Lacquer and varnishd both load.
//! The rewrite works on the tokens and keeps everything else of the text
//! (layout, comments) as it was. Directors become `directors` objects made
//! in `vcl_init`; `vcl_fetch` becomes `vcl_backend_response` (where `req.`
//! is `bereq.`), `vcl_error` becomes `vcl_synth` (where `obj.` is
//! `resp.`); `error`, `purge;`, `esi;`, `remove`, `req.request`,
//! `req.backend`, `req.backend.healthy`, `set req.hash +=`, `server.port`
//! and the returns whose names changed take their 4.1 forms. What has no
//! exact translation gets a comment saying so.

use crate::lexer::{lex, Tok, Token};

/// Whether a program reads as VCL 3.0: no `vcl 4.x;` line, and a
/// construct only Varnish 3 has.
pub fn is_vcl3(text: &str) -> bool {
    let Ok(tokens) = lex(text, 0) else {
        return false;
    };
    if matches!(tokens.first().map(|t| &t.tok), Some(Tok::Ident(v)) if v == "vcl") {
        return false;
    }
    tokens.iter().enumerate().any(|(i, t)| match &t.tok {
        Tok::Ident(name) => {
            matches!(
                name.as_str(),
                "vcl_fetch" | "vcl_error" | "req.request" | "bereq.request" | "director"
            ) || (name == "error" && matches!(tokens.get(i + 1).map(|t| &t.tok), Some(Tok::Num { .. })))
                || (name == "set"
                    && matches!(tokens.get(i + 1).map(|t| &t.tok), Some(Tok::Ident(n)) if n == "req.backend" || n == "req.hash"))
        }
        _ => false,
    })
}

/// One director of the old program.
struct Director {
    name: String,
    kind: String,
    members: Vec<(String, Option<String>)>,
}

/// A text edit: replace `start..end` of the source.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// Rewrites a VCL 3.0 program as VCL 4.1; an error names what could not
/// be read.
pub fn upgrade(text: &str) -> Result<String, String> {
    let tokens = lex(text, 0).map_err(|e| e.message)?;
    let mut w = Rewriter {
        text,
        tokens: &tokens,
        edits: Vec::new(),
        directors: Vec::new(),
        needs_std: false,
        sub: String::new(),
    };
    w.walk()?;
    Ok(w.finish())
}

struct Rewriter<'a> {
    text: &'a str,
    tokens: &'a [Token],
    edits: Vec<Edit>,
    directors: Vec<Director>,
    needs_std: bool,
    /// The subroutine being rewritten (its old name).
    sub: String,
}

impl Rewriter<'_> {
    fn tok(&self, i: usize) -> &Tok {
        self.tokens.get(i).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn start(&self, i: usize) -> usize {
        self.tokens
            .get(i)
            .map_or(self.text.len(), |t| t.span.start as usize)
    }

    fn end(&self, i: usize) -> usize {
        self.tokens
            .get(i)
            .map_or(self.text.len(), |t| t.span.end as usize)
    }

    fn src(&self, from: usize, to: usize) -> &str {
        &self.text[self.start(from)..self.end(to)]
    }

    fn edit(&mut self, from: usize, to: usize, text: impl Into<String>) {
        let (start, end) = (self.start(from), self.end(to));
        self.edits.push(Edit {
            start,
            end,
            text: text.into(),
        });
    }

    /// Inserts text before token `i` (after it, with `after`).
    fn insert(&mut self, i: usize, after: bool, text: impl Into<String>) {
        let at = if after { self.end(i) } else { self.start(i) };
        self.edits.push(Edit {
            start: at,
            end: at,
            text: text.into(),
        });
    }

    fn is_op(&self, i: usize, op: &str) -> bool {
        matches!(self.tok(i), Tok::Op(o) if *o == op)
    }

    fn ident(&self, i: usize) -> Option<&str> {
        match self.tok(i) {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }

    /// The index of the `}` closing the `{` at `open`.
    fn matching(&self, open: usize) -> Result<usize, String> {
        let mut depth = 0;
        for i in open..self.tokens.len() {
            if self.is_op(i, "{") {
                depth += 1;
            } else if self.is_op(i, "}") {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
        }
        Err("a block is not closed".into())
    }

    /// The next `;` from `i`.
    fn semicolon(&self, i: usize) -> Result<usize, String> {
        (i..self.tokens.len())
            .find(|&j| self.is_op(j, ";"))
            .ok_or_else(|| "a statement is not ended by ';'".to_string())
    }

    fn walk(&mut self) -> Result<(), String> {
        let mut i = 0;
        let mut depth = 0usize;
        while i < self.tokens.len() {
            match self.tok(i).clone() {
                Tok::Op("{") => depth += 1,
                Tok::Op("}") => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        self.sub.clear();
                    }
                }
                Tok::Ident(word) if depth == 0 && word == "director" => {
                    i = self.director(i)? + 1;
                    continue;
                }
                Tok::Ident(word) if depth == 0 && word == "acl" => self.sub = "<acl>".into(),
                Tok::Str(addr) if depth > 0 && self.sub == "<acl>" && self.is_op(i + 1, "/") => {
                    if let Tok::Num { value, .. } = self.tok(i + 2).clone() {
                        self.acl_entry(i, &addr, value as u32);
                    }
                }
                Tok::Ident(word) if depth == 0 && word == "sub" => {
                    if let Some(name) = self.ident(i + 1).map(str::to_string) {
                        let new = match name.as_str() {
                            "vcl_fetch" => Some("vcl_backend_response"),
                            "vcl_error" => Some("vcl_synth"),
                            _ => None,
                        };
                        if let Some(new) = new {
                            self.edit(i + 1, i + 1, new);
                        }
                        self.sub = name;
                    }
                }
                Tok::Ident(word) if depth > 0 => {
                    i = self.statement(i, &word)?;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }

    /// `director NAME KIND { { .backend = b; .weight = n; } ... }`: taken
    /// out, to be made in `vcl_init`. Returns the index of its last `}`.
    fn director(&mut self, at: usize) -> Result<usize, String> {
        let name = self
            .ident(at + 1)
            .ok_or("a director without a name")?
            .to_string();
        let kind = self
            .ident(at + 2)
            .ok_or("a director without a kind")?
            .to_string();
        if !self.is_op(at + 3, "{") {
            return Err(format!("director {name}: expected '{{'"));
        }
        let close = self.matching(at + 3)?;
        let mut members = Vec::new();
        let mut j = at + 4;
        while j < close {
            let field = |w: &Self, name: &str| {
                w.is_op(j, ".") && w.ident(j + 1) == Some(name) && w.is_op(j + 2, "=")
            };
            if field(self, "backend") {
                let backend = self.ident(j + 3).unwrap_or_default().to_string();
                members.push((backend, None));
            }
            if field(self, "weight") {
                if let (Some(last), Tok::Num { value, .. }) = (members.last_mut(), self.tok(j + 3))
                {
                    last.1 = Some(value.to_string());
                }
            }
            j += 1;
        }
        self.edit(
            at,
            close,
            format!("# director {name} {kind}: made in the vcl_init that follows the directors"),
        );
        self.directors.push(Director {
            name,
            kind,
            members,
        });
        Ok(close)
    }

    /// An ACL entry with bits past its mask, which Varnish 4 and later
    /// refuse: the network it stands for, with the old text in a comment.
    fn acl_entry(&mut self, i: usize, addr: &str, bits: u32) {
        let (net, width) = match addr.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => (u128::from(u32::from(a)), 32),
            Ok(std::net::IpAddr::V6(a)) => (u128::from(a), 128),
            Err(_) => return,
        };
        if bits > width {
            return;
        }
        let host = if bits == width {
            0
        } else {
            (1u128 << (width - bits)) - 1
        };
        if net & host == 0 {
            return;
        }
        let fixed = match width {
            32 => std::net::Ipv4Addr::from((net & !host) as u32).to_string(),
            _ => std::net::Ipv6Addr::from(net & !host).to_string(),
        };
        self.edit(i, i, format!("\"{fixed}\""));
        self.insert(i + 2, true, format!(" /* was \"{addr}\"/{bits} */"));
    }

    /// Rewrites one statement or word inside a subroutine; returns where
    /// to go on.
    fn statement(&mut self, i: usize, word: &str) -> Result<usize, String> {
        let sub = self.sub.clone();
        match word {
            "error" if matches!(self.tok(i + 1), Tok::Num { .. }) => {
                let end = self.semicolon(i)?;
                let status = self.src(i + 1, i + 1).to_string();
                let reason = if end > i + 2 {
                    format!(", {}", self.src(i + 2, end - 1))
                } else {
                    String::new()
                };
                self.edit(i, end - 1, format!("return (synth({status}{reason}))"));
                return Ok(end + 1);
            }
            "purge" if self.is_op(i + 1, ";") => {
                self.edit(i, i, "return (purge)");
                if sub != "vcl_recv" {
                    self.edit(
                        i + 1,
                        i + 1,
                        "; # VCL 4 purges from vcl_recv: move this there",
                    );
                }
                return Ok(i + 2);
            }
            "esi" if self.is_op(i + 1, ";") => {
                self.edit(i, i, "set beresp.do_esi = true");
                return Ok(i + 2);
            }
            "remove" => self.edit(i, i, "unset"),
            "synthetic" if !self.is_op(i + 1, "(") => {
                // `synthetic EXPR;` is a call now; what is inside is
                // rewritten as it goes.
                let end = self.semicolon(i)?;
                let (start, next) = (self.start(i), self.start(i + 1));
                self.edits.push(Edit {
                    start,
                    end: next,
                    text: "synthetic(".into(),
                });
                self.insert(end, false, ")");
                return Ok(i + 1);
            }
            "set" if self.ident(i + 1) == Some("req.hash") && self.is_op(i + 2, "+=") => {
                let end = self.semicolon(i)?;
                let (start, value) = (self.start(i), self.start(i + 3));
                self.edits.push(Edit {
                    start,
                    end: value,
                    text: "hash_data(".into(),
                });
                self.insert(end, false, ")");
                return Ok(i + 3);
            }
            "set" if self.ident(i + 1) == Some("req.backend") && self.is_op(i + 2, "=") => {
                let end = self.semicolon(i)?;
                let target = self.src(i + 3, end - 1).to_string();
                let value = match self.directors.iter().find(|d| d.name == target) {
                    Some(d) if d.kind == "hash" => format!("{target}.backend(req.url)"),
                    Some(d) if d.kind == "client" => format!("{target}.backend(client.identity)"),
                    Some(_) => format!("{target}.backend()"),
                    None => target,
                };
                self.edit(i, end - 1, format!("set req.backend_hint = {value}"));
                return Ok(end + 1);
            }
            "return" if self.is_op(i + 1, "(") && self.is_op(i + 3, ")") => {
                let action = self.ident(i + 2).unwrap_or_default().to_string();
                let new = match (sub.as_str(), action.as_str()) {
                    ("vcl_recv", "lookup") => Some("return (hash)".to_string()),
                    ("vcl_hash", "hash") => Some("return (lookup)".to_string()),
                    ("vcl_pass", "pass") => Some("return (fetch)".to_string()),
                    ("vcl_fetch", "hit_for_pass" | "pass") => {
                        Some("set beresp.uncacheable = true; return (deliver)".to_string())
                    }
                    ("vcl_fetch", "restart") => Some("return (retry)".to_string()),
                    ("vcl_error", "restart") => Some("return (restart)".to_string()),
                    _ => None,
                };
                if let Some(new) = new {
                    self.edit(i, i + 3, new);
                }
                return Ok(i + 4);
            }
            _ => {}
        }
        if let Some(new) = self.rename(word, &sub) {
            self.edit(i, i, new);
        }
        Ok(i + 1)
    }

    /// A variable's 4.1 name, where it changed.
    fn rename(&mut self, word: &str, sub: &str) -> Option<String> {
        let exact = match word {
            "req.request" if sub == "vcl_fetch" => Some("bereq.method"),
            "req.request" => Some("req.method"),
            "bereq.request" => Some("bereq.method"),
            "req.backend" => Some("req.backend_hint"),
            "resp.response" => Some("resp.reason"),
            "beresp.response" => Some("beresp.reason"),
            "obj.response" if sub == "vcl_error" => Some("resp.reason"),
            "obj.lastuse" => Some("obj.last_use"),
            _ => None,
        };
        if let Some(new) = exact {
            return Some(new.to_string());
        }
        if word == "req.backend.healthy" {
            self.needs_std = true;
            return Some("std.healthy(req.backend_hint)".to_string());
        }
        if word == "server.port" {
            self.needs_std = true;
            return Some("std.port(server.ip)".to_string());
        }
        if word == "beresp.cacheable" {
            return Some("(beresp.ttl > 0s) /* was beresp.cacheable */".to_string());
        }
        if sub == "vcl_fetch" {
            if let Some(rest) = word.strip_prefix("req.") {
                return Some(format!("bereq.{rest}"));
            }
        }
        if sub == "vcl_error" {
            if let Some(rest) = word.strip_prefix("obj.") {
                return Some(format!("resp.{rest}"));
            }
        }
        None
    }

    /// The `vcl_init` that makes the directors, in place of the last one
    /// (objects must be made before the subroutines that use them).
    fn vcl_init(&self) -> String {
        let mut out = String::from("sub vcl_init {\n");
        for d in &self.directors {
            let (constructor, weighted) = match d.kind.as_str() {
                "round-robin" => ("round_robin", false),
                "random" => ("random", true),
                "client" | "hash" => ("hash", true),
                "fallback" => ("fallback", false),
                other => {
                    out.push_str(&format!(
                        "    # director {} {other}: no VCL 4 equivalent; a round-robin stands in\n",
                        d.name
                    ));
                    ("round_robin", false)
                }
            };
            out.push_str(&format!(
                "    new {} = directors.{constructor}();\n",
                d.name
            ));
            for (backend, weight) in &d.members {
                match (weighted, weight) {
                    (true, w) => out.push_str(&format!(
                        "    {}.add_backend({backend}, {});\n",
                        d.name,
                        w.as_deref().unwrap_or("1")
                    )),
                    (false, _) => {
                        out.push_str(&format!("    {}.add_backend({backend});\n", d.name))
                    }
                }
            }
        }
        out.push_str("}\n");
        out
    }

    fn finish(self) -> String {
        let init = self.vcl_init();
        let mut edits = self.edits;
        if let Some(last) = self.directors.last() {
            let marker = format!("# director {} ", last.name);
            if let Some(e) = edits.iter_mut().rev().find(|e| e.text.starts_with(&marker)) {
                e.text = format!("{}\n{init}", e.text);
            }
        }
        // Insertions before the replacements that start where they do.
        edits.sort_by_key(|e| (e.start, e.end > e.start));
        let mut out = String::from("vcl 4.1;\n\n");
        if self.needs_std {
            out.push_str("import std;\n");
        }
        if !self.directors.is_empty() {
            out.push_str("import directors;\n");
        }
        if self.needs_std || !self.directors.is_empty() {
            out.push('\n');
        }
        let mut at = 0;
        for e in &edits {
            if e.start < at {
                continue;
            }
            out.push_str(&self.text[at..e.start]);
            out.push_str(&e.text);
            at = e.end;
        }
        out.push_str(&self.text[at..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"backend bw1 { .host = "127.0.0.1"; .port = "8081"; }
backend bw2 { .host = "127.0.0.1"; .port = "8082"; }
director default_director round-robin {
{ .backend = bw1; }
{ .backend = bw2; }
}
acl internal { "127.0.0.1"; "192.168.1.38"/26; }
sub vcl_recv {
    set req.backend = default_director;
    set req.grace = 6h;
    if (!req.backend.healthy) {
        remove req.http.Cookie;
    }
    if (req.request == "PURGE") {
        purge;
    }
    if (req.url ~ "^/(cron|install)\.php$" && !client.ip ~ internal) {
        error 404 "Page not found.";
    }
    if (server.port == 443) {
        return (pass);
    }
    return (lookup);
}
sub vcl_hash {
    set req.hash += req.url;
    return (hash);
}
sub vcl_fetch {
    set beresp.grace = 6h;
    if (req.url ~ "\.html$") {
        esi;
    }
    if (beresp.http.Set-Cookie) {
        return (hit_for_pass);
    }
}
sub vcl_error {
    set obj.http.Content-Type = "text/html";
    synthetic {"<h1>"} + obj.status + {"</h1>"};
    return (deliver);
}
"#;

    #[test]
    fn a_varnish_3_program_is_recognised() {
        assert!(is_vcl3(OLD));
        assert!(!is_vcl3("vcl 4.1; backend b { .host = \"x\"; }"));
        assert!(!is_vcl3(
            "backend b { .host = \"x\"; } sub vcl_recv { return (hash); }"
        ));
    }

    #[test]
    fn it_becomes_a_program_that_compiles() {
        let new = upgrade(OLD).unwrap();
        for want in [
            "vcl 4.1;",
            "import std;",
            "import directors;",
            "set req.backend_hint = default_director.backend();",
            "if (!std.healthy(req.backend_hint))",
            "unset req.http.Cookie;",
            "req.method == \"PURGE\"",
            "return (purge);",
            "return (synth(404, \"Page not found.\"));",
            "std.port(server.ip) == 443",
            "return (hash);",
            "hash_data(req.url);",
            "return (lookup);",
            "sub vcl_backend_response",
            "bereq.url ~",
            "set beresp.do_esi = true;",
            "set beresp.uncacheable = true; return (deliver);",
            "sub vcl_synth",
            "set resp.http.Content-Type",
            "new default_director = directors.round_robin();",
            "made in the vcl_init that follows the directors\nsub vcl_init {",
            "default_director.add_backend(bw2);",
            "\"192.168.1.0\"/26 /* was \"192.168.1.38\"/26 */;",
        ] {
            assert!(new.contains(want), "want {want:?} in:\n{new}");
        }
        let program = crate::compile_str("upgraded.vcl", &new, &crate::Options::default());
        if let Err(e) = program {
            panic!("{e:?}\n{new}");
        }
    }
}
