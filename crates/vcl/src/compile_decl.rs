//! The checker and compiler, declarations: backends with their fields
//! resolved, probes with their bounds checked, ACL entries resolved.

use crate::acl::Acl;
use crate::ast::{self, FieldValue};
use crate::compile::{CResult, Compiler, Symbol};
use crate::program::{BackendDef, ProbeDef};
use crate::source::{CompileError, Span};
use crate::types::Value;
use std::net::ToSocketAddrs;
use std::time::Duration;

impl Compiler {
    /// A constant field value: literals only.
    fn const_value(&self, e: &ast::Expr) -> Option<Value> {
        match &e.kind {
            ast::ExprKind::Str(s) => Some(Value::str(s)),
            ast::ExprKind::Int(i) => Some(Value::Int(*i)),
            ast::ExprKind::Real(f) => Some(Value::Real(*f)),
            ast::ExprKind::Duration(d) => Some(Value::Duration(*d)),
            ast::ExprKind::Bytes(b) => Some(Value::Bytes(*b)),
            ast::ExprKind::Blob(b) => Some(Value::Blob(bytes::Bytes::copy_from_slice(b))),
            _ => None,
        }
    }

    fn field_str(&self, f: &ast::Field) -> CResult<String> {
        match &f.value {
            FieldValue::Expr(e) => match self.const_value(e) {
                Some(Value::Str(s)) => Ok(String::from_utf8_lossy(&s).into_owned()),
                Some(Value::Int(i)) => Ok(i.to_string()),
                _ => Err(CompileError::new(
                    format!("Expected a string for .{}", f.name.name),
                    e.span,
                )),
            },
            FieldValue::Strings(parts) => Ok(parts
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>()
                .join("")),
            FieldValue::Probe(_, span) => Err(CompileError::new(
                format!("Expected a string for .{}", f.name.name),
                *span,
            )),
        }
    }

    fn field_duration(&self, f: &ast::Field) -> CResult<Duration> {
        match &f.value {
            FieldValue::Expr(e) => match self.const_value(e) {
                Some(Value::Duration(d)) if d >= 0.0 => Ok(Duration::from_secs_f64(d)),
                _ => Err(CompileError::new(
                    format!("Expected a duration (like 5s) for .{}", f.name.name),
                    e.span,
                )),
            },
            _ => Err(CompileError::new(
                format!("Expected a duration for .{}", f.name.name),
                f.name.span,
            )),
        }
    }

    fn field_int(&self, f: &ast::Field) -> CResult<u64> {
        match &f.value {
            FieldValue::Expr(e) => match self.const_value(e) {
                Some(Value::Int(i)) if i >= 0 => Ok(i as u64),
                _ => Err(CompileError::new(
                    format!("Expected a number for .{}", f.name.name),
                    e.span,
                )),
            },
            _ => Err(CompileError::new(
                format!("Expected a number for .{}", f.name.name),
                f.name.span,
            )),
        }
    }

    pub(crate) fn probe(&mut self, name: &str, fields: &[ast::Field]) -> CResult<ProbeDef> {
        let mut p = ProbeDef {
            name: name.to_string(),
            ..Default::default()
        };
        let mut seen: Vec<&str> = Vec::new();
        for f in fields {
            let n = f.name.name.as_str();
            if seen.contains(&n) {
                return Err(CompileError::new(
                    format!("Field '.{n}' redefined"),
                    f.name.span,
                ));
            }
            seen.push(n);
            match n {
                "url" => p.url = Some(self.field_str(f)?),
                "request" => {
                    let text = match &f.value {
                        FieldValue::Strings(parts) => {
                            parts.iter().map(|(s, _)| format!("{s}\r\n")).collect::<String>() + "\r\n"
                        }
                        _ => self.field_str(f)? + "\r\n\r\n",
                    };
                    p.request = Some(text);
                }
                "expected_response" => p.expected_response = self.field_int(f)?.min(999) as u16,
                "timeout" => p.timeout = self.field_duration(f)?,
                "interval" => p.interval = self.field_duration(f)?,
                "window" => p.window = self.field_int(f)?.min(u32::MAX as u64) as u32,
                "threshold" => p.threshold = self.field_int(f)?.min(u32::MAX as u64) as u32,
                "initial" => p.initial = Some(self.field_int(f)?.min(u32::MAX as u64) as u32),
                _ => {
                    return Err(CompileError::new(
                        format!("Unknown field: '.{n}' in probe (expected one of .url, .request, .expected_response, .timeout, .interval, .window, .threshold, .initial)"),
                        f.name.span,
                    ))
                }
            }
        }
        let at = fields.first().map_or(Span::default(), |f| f.name.span);
        if p.url.is_some() && p.request.is_some() {
            return Err(CompileError::new(
                "Probe: only one of .url and .request may be given",
                at,
            ));
        }
        if p.window > 64 {
            return Err(CompileError::new("Probe: .window must be 64 or less", at));
        }
        if p.threshold > p.window {
            return Err(CompileError::new(
                "Probe: .threshold must not be greater than .window",
                at,
            ));
        }
        if p.initial.is_some_and(|i| i > p.threshold) {
            return Err(CompileError::new(
                "Probe: .initial must not be greater than .threshold",
                at,
            ));
        }
        if p.url.is_none() && p.request.is_none() {
            p.url = Some("/".to_string());
        }
        Ok(p)
    }

    pub(crate) fn backend(
        &mut self,
        name: &ast::Ident,
        fields: Option<&[ast::Field]>,
    ) -> CResult<BackendDef> {
        let mut b = BackendDef {
            name: name.name.clone(),
            addr: None,
            host: String::new(),
            port: "80".to_string(),
            host_header: None,
            path: None,
            proxy_header: None,
            preamble: None,
            ssl: None,
            h2c: false,
            connect_timeout: None,
            first_byte_timeout: None,
            between_bytes_timeout: None,
            max_connections: None,
            wait_timeout: None,
            wait_limit: None,
            probe: None,
        };
        let Some(fields) = fields else {
            return Ok(b);
        };
        let mut seen: Vec<&str> = Vec::new();
        let mut tls = TlsFields::default();
        for f in fields {
            let n = f.name.name.as_str();
            if seen.contains(&n) {
                return Err(CompileError::new(
                    format!("Field '.{n}' redefined"),
                    f.name.span,
                ));
            }
            seen.push(n);
            self.backend_field(&mut b, f, &mut tls)?;
        }
        backend_tls(&mut b, name, fields, tls)?;
        backend_address(&mut b, name, fields)?;
        Ok(b)
    }

    /// One field of a backend declaration.
    fn backend_field<'f>(
        &mut self,
        b: &mut BackendDef,
        f: &'f ast::Field,
        tls: &mut TlsFields<'f>,
    ) -> CResult<()> {
        let n = f.name.name.as_str();
        match n {
            "host" => b.host = self.field_str(f)?,
            "port" => b.port = self.field_str(f)?,
            "host_header" => b.host_header = Some(self.field_str(f)?),
            "path" => b.path = Some(self.field_str(f)?),
            "connect_timeout" => b.connect_timeout = Some(self.field_duration(f)?),
            "first_byte_timeout" => b.first_byte_timeout = Some(self.field_duration(f)?),
            "between_bytes_timeout" => b.between_bytes_timeout = Some(self.field_duration(f)?),
            "max_connections" => b.max_connections = Some(self.field_int(f)?),
            "wait_timeout" => b.wait_timeout = Some(self.field_duration(f)?),
            "wait_limit" => b.wait_limit = Some(self.field_int(f)?),
            "preamble" => match &f.value {
                FieldValue::Expr(e) => match self.const_value(e) {
                    Some(Value::Blob(blob)) => b.preamble = Some(blob.to_vec()),
                    _ => {
                        return Err(CompileError::new(
                            "Expected a BLOB (:base64:) for .preamble",
                            e.span,
                        ))
                    }
                },
                _ => {
                    return Err(CompileError::new(
                        "Expected a BLOB (:base64:) for .preamble",
                        f.name.span,
                    ))
                }
            },
            "ssl" | "ssl_sni" | "ssl_verify_peer" | "ssl_verify_host" => {
                let v = self.field_int(f)?;
                if v > 1 {
                    return Err(CompileError::new(format!(".{n} must be 0 or 1"), f.name.span));
                }
                tls.flags.push((n, v == 1));
            }
            "certificate" => {
                let file = self.field_str(f)?;
                // A file that cannot be read is this line's error, not
                // a failure at the first fetch.
                if let Err(e) = std::fs::File::open(&file) {
                    return Err(CompileError::new(
                        format!("Cannot read .certificate \"{file}\": {e}"),
                        f.name.span,
                    ));
                }
                tls.certificate = Some((file, f.name.span));
            }
            "h2c" => {
                let v = self.field_int(f)?;
                if v > 1 {
                    return Err(CompileError::new(".h2c must be 0 or 1", f.name.span));
                }
                b.h2c = v == 1;
            }
            "alpn" => {
                let text = self.field_str(f)?;
                let protocols: Vec<String> = text
                    .split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect();
                if protocols.is_empty() || protocols.iter().any(|p| p != "h2" && p != "http/1.1") {
                    return Err(CompileError::new(
                        format!(".alpn \"{text}\": a list of h2 and http/1.1"),
                        f.name.span,
                    ));
                }
                tls.alpn = Some((protocols, f.name.span));
            }
            "proxy_header" => {
                let v = self.field_int(f)?;
                if v != 1 && v != 2 {
                    return Err(CompileError::new(".proxy_header must be 1 or 2", f.name.span));
                }
                b.proxy_header = Some(v as u8);
            }
            "probe" => {
                let index = match &f.value {
                    FieldValue::Probe(inner, _) => {
                        let def = self.probe(&format!("{}.probe", b.name), inner)?;
                        self.probes.push(Symbol {
                            def,
                            span: f.name.span,
                            used: true,
                        });
                        self.probes.len() - 1
                    }
                    FieldValue::Expr(ast::Expr {
                        kind: ast::ExprKind::Ident(pn),
                        span,
                    }) => {
                        let Some(i) = self.probes.iter().position(|p| &p.def.name == pn) else {
                            return Err(CompileError::new(format!("Probe '{pn}' not found"), *span));
                        };
                        self.probes[i].used = true;
                        i
                    }
                    _ => return Err(CompileError::new("Expected a probe name or { ... }", f.name.span)),
                };
                b.probe = Some(index);
            }
            _ => {
                return Err(CompileError::new(
                    format!("Unknown field: '.{n}' in backend (expected one of .host, .port, .path, .host_header, .connect_timeout, .first_byte_timeout, .between_bytes_timeout, .max_connections, .wait_timeout, .wait_limit, .probe, .proxy_header, .preamble, .ssl, .ssl_sni, .ssl_verify_peer, .ssl_verify_host, .certificate, .alpn, .h2c)"),
                    f.name.span,
                ))
            }
        }
        Ok(())
    }

    pub(crate) fn acl(&mut self, name: &str, entries: &[ast::AclEntry]) -> CResult<Acl> {
        let mut acl = Acl {
            name: name.to_string(),
            rules: Vec::new(),
            log: false,
        };
        for e in entries {
            match Acl::rules_for(&e.addr, e.mask, e.negated) {
                Ok(rules) => acl.rules.extend(rules),
                Err(_) if e.optional => {}
                Err(msg) => return Err(CompileError::new(format!("ACL {name}: {msg}"), e.span)),
            }
        }
        acl.sort();
        Ok(acl)
    }
}

/// What a backend declaration says of TLS, gathered over its fields and
/// settled once they are all read.
#[derive(Default)]
struct TlsFields<'f> {
    flags: Vec<(&'f str, bool)>,
    certificate: Option<(String, Span)>,
    alpn: Option<(Vec<String>, Span)>,
}

/// Settles a backend's TLS (`.ssl` and what goes with it).
fn backend_tls(
    b: &mut BackendDef,
    name: &ast::Ident,
    fields: &[ast::Field],
    mut tls: TlsFields<'_>,
) -> CResult<()> {
    let flag = |name: &str| tls.flags.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    if flag("ssl") == Some(true) {
        b.ssl = Some(crate::program::BackendTlsDef {
            sni: flag("ssl_sni").unwrap_or(true),
            verify_peer: flag("ssl_verify_peer").unwrap_or(true),
            verify_host: flag("ssl_verify_host").unwrap_or(true),
            certificate: tls.certificate.take().map(|(file, _)| file),
            alpn: tls
                .alpn
                .take()
                .map_or_else(|| vec!["h2".into(), "http/1.1".into()], |(p, _)| p),
        });
        if b.h2c {
            let at = fields
                .iter()
                .find(|f| f.name.name == "h2c")
                .map_or(name.span, |f| f.name.span);
            return Err(CompileError::new(
                ".h2c is for cleartext backends: over TLS, HTTP/2 is settled by .alpn",
                at,
            ));
        }
        if !fields.iter().any(|f| f.name.name == "port") {
            b.port = "443".to_string();
        }
    }
    if let Some((_, span)) = tls.certificate {
        return Err(CompileError::new(".certificate needs .ssl = 1", span));
    }
    if let Some((_, span)) = tls.alpn {
        return Err(CompileError::new(".alpn needs .ssl = 1", span));
    }
    Ok(())
}

/// Checks where a backend is (`.path`, or `.host` with its port) and
/// resolves its address.
fn backend_address(b: &mut BackendDef, name: &ast::Ident, fields: &[ast::Field]) -> CResult<()> {
    if let Some(path) = &b.path {
        let at = fields
            .iter()
            .find(|f| f.name.name == "path")
            .map_or(name.span, |f| f.name.span);
        if !b.host.is_empty() {
            return Err(CompileError::new(
                "Only one of .host or .path may be specified",
                at,
            ));
        }
        if !path.starts_with('/') || path.len() > 107 {
            return Err(CompileError::new(
                format!("Not an absolute path of at most 107 characters: \"{path}\""),
                at,
            ));
        }
        return Ok(());
    }
    if b.host.is_empty() {
        return Err(CompileError::new(
            format!("Mandatory field '.host' missing in backend {}", b.name),
            name.span,
        ));
    }
    // `.host` may carry its own port, as `host:port`, `[v6]:port` or
    // `host port`; it then wins over `.port`.
    if let Ok((host, Some(port))) = lacquer_core::host::split_host_port(&b.host) {
        if !host.is_empty() {
            b.port = port;
            b.host = host;
        }
    }
    let port: u16 = match b.port.as_str() {
        "http" => 80,
        "https" => 443,
        p => p.parse().map_err(|_| {
            CompileError::new(
                format!("backend {}: invalid port \"{p}\"", b.name),
                name.span,
            )
        })?,
    };
    let host = b.host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next());
    match addr {
        Some(a) => b.addr = Some(a),
        None => {
            return Err(CompileError::new(
                format!(
                    "Backend host \"{}\": could not be resolved to an IP address",
                    b.host
                ),
                fields
                    .iter()
                    .find(|f| f.name.name == "host")
                    .map_or(name.span, |f| f.name.span),
            ))
        }
    }
    Ok(())
}
