//! The `-A` file: Hitch's configuration syntax (`key = value` lines, `#`
//! comments, quoted or bare values, `{ … }` blocks for `frontend` and
//! `pem-file`). Keys that only mean something to a separate TLS proxy
//! (`backend`, `workers`, `write-proxy-v2` …) are accepted with a warning,
//! so an existing hitch.conf loads as it is; any other unknown key is an
//! error naming its file, line and column.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A configuration error, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// One certificate: a PEM file holding the key and the chain (or the key
/// apart), and an OCSP response to staple.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PemSpec {
    pub cert: PathBuf,
    pub private_key: Option<PathBuf>,
    pub ocsp_resp_file: Option<PathBuf>,
}

/// The TLS settings a frontend uses (the global ones, or its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `TLSv1.2`, `TLSv1.3`.
    pub protos: Vec<String>,
    /// TLS 1.2 suites, OpenSSL's cipher-list syntax.
    pub ciphers: Option<String>,
    /// TLS 1.3 suites, colon-separated.
    pub ciphersuites: Option<String>,
    pub prefer_server_ciphers: bool,
    pub sni_nomatch_abort: bool,
    /// Client certificates: asked for and checked when offered
    /// (`optional`), or demanded (`required`), against `client_verify_ca`.
    pub client_verify: ClientVerify,
    pub client_verify_ca: Option<PathBuf>,
    /// `quic = on`: the frontend also speaks HTTP/3 over QUIC on its
    /// address's UDP port (Lacquer only).
    pub quic: bool,
}

/// `client-verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientVerify {
    None,
    Optional,
    Required,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            protos: vec!["TLSv1.2".into(), "TLSv1.3".into()],
            ciphers: None,
            ciphersuites: None,
            prefer_server_ciphers: false,
            sni_nomatch_abort: false,
            client_verify: ClientVerify::None,
            client_verify_ca: None,
            quic: false,
        }
    }
}

/// A listening address with its own certificates and settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontend {
    /// `*` or empty for every address.
    pub host: String,
    pub port: u16,
    pub pems: Vec<PemSpec>,
    /// Offer the global certificates too (`match-global-certs`).
    pub match_global_certs: bool,
    pub settings: Settings,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFile {
    pub frontends: Vec<Frontend>,
    pub pems: Vec<PemSpec>,
    pub pem_dir: Option<PathBuf>,
    pub pem_dir_glob: Option<String>,
    pub settings: Settings,
    /// ALPN protocols offered, in order of preference.
    pub alpn: Vec<String>,
    /// Sessions remembered for resumption (0: none).
    pub session_cache: usize,
    pub ocsp_dir: Option<PathBuf>,
    pub handshake_timeout: Duration,
    /// Certificates obtained and renewed by ACME (`acme` sections).
    pub acme: Vec<crate::acme::AcmeSpec>,
    /// What was accepted without effect, one line each.
    pub warnings: Vec<String>,
}

impl Default for TlsFile {
    fn default() -> Self {
        TlsFile {
            frontends: Vec::new(),
            pems: Vec::new(),
            pem_dir: None,
            pem_dir_glob: None,
            settings: Settings::default(),
            alpn: vec!["h2".into(), "http/1.1".into()],
            session_cache: 1024,
            ocsp_dir: None,
            handshake_timeout: Duration::from_secs(3),
            acme: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Hitch's keys that concern a proxy in front of a cache, not a cache that
/// terminates TLS itself.
const PROXY_ONLY: &[&str] = &[
    "backend",
    "workers",
    "backlog",
    "keepalive",
    "chroot",
    "user",
    "group",
    "quiet",
    "syslog",
    "syslog-facility",
    "daemon",
    "write-ip",
    "write-proxy",
    "write-proxy-v1",
    "write-proxy-v2",
    "proxy-proxy",
    "proxy-tlv",
    "proxy-client-cert",
    "log-level",
    "log-filename",
    "send-bufsize",
    "recv-bufsize",
    "backend-connect-timeout",
    "ssl-engine",
    "ecdh-curve",
    "tcp-fastopen",
    "ocsp-verify-staple",
    "ocsp-connect-tmo",
    "ocsp-resp-tmo",
    "ocsp-refresh-interval",
];

/// A token of the file, with where it starts.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Eq,
    Open,
    Close,
    Newline,
}

struct Lexed {
    tok: Tok,
    line: usize,
    col: usize,
}

fn lex(text: &str, file: &str) -> Result<Vec<Lexed>, ConfigError> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let chars: Vec<char> = raw.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let col = i + 1;
            match c {
                '#' => break,
                c if c.is_whitespace() => i += 1,
                '=' => {
                    out.push(Lexed {
                        tok: Tok::Eq,
                        line,
                        col,
                    });
                    i += 1;
                }
                '{' => {
                    out.push(Lexed {
                        tok: Tok::Open,
                        line,
                        col,
                    });
                    i += 1;
                }
                '}' => {
                    out.push(Lexed {
                        tok: Tok::Close,
                        line,
                        col,
                    });
                    i += 1;
                }
                '"' => {
                    let mut s = String::new();
                    i += 1;
                    loop {
                        match chars.get(i) {
                            None => {
                                return Err(ConfigError(format!(
                                    "{file}:{line}:{col}: unterminated string"
                                )))
                            }
                            Some('"') => break,
                            Some('\\') if chars.get(i + 1).is_some() => {
                                s.push(chars[i + 1]);
                                i += 2;
                                continue;
                            }
                            Some(&c) => s.push(c),
                        }
                        i += 1;
                    }
                    i += 1;
                    out.push(Lexed {
                        tok: Tok::Str(s),
                        line,
                        col,
                    });
                }
                _ => {
                    let start = i;
                    while i < chars.len()
                        && !chars[i].is_whitespace()
                        && !matches!(chars[i], '=' | '{' | '}' | '#' | '"')
                    {
                        i += 1;
                    }
                    let w: String = chars[start..i].iter().collect();
                    out.push(Lexed {
                        tok: Tok::Word(w),
                        line,
                        col,
                    });
                }
            }
        }
        out.push(Lexed {
            tok: Tok::Newline,
            line,
            col: chars.len() + 1,
        });
    }
    Ok(out)
}

/// A value: one or more words or strings on the line, or a block.
enum Value {
    Text(String, usize, usize),
    Block(Vec<(String, Value, usize, usize)>),
}

struct Parser<'a> {
    toks: Vec<Lexed>,
    at: usize,
    file: &'a str,
}

impl Parser<'_> {
    fn err(&self, line: usize, col: usize, msg: impl std::fmt::Display) -> ConfigError {
        ConfigError(format!("{}:{line}:{col}: {msg}", self.file))
    }

    fn skip_newlines(&mut self) {
        while self
            .toks
            .get(self.at)
            .is_some_and(|t| t.tok == Tok::Newline)
        {
            self.at += 1;
        }
    }

    /// `key = value` lines until the end (or a `}` when `nested`).
    fn entries(&mut self, nested: bool) -> Result<Vec<(String, Value, usize, usize)>, ConfigError> {
        let mut out = Vec::new();
        loop {
            self.skip_newlines();
            let Some(t) = self.toks.get(self.at) else {
                if nested {
                    let (line, col) = self.toks.last().map_or((1, 1), |t| (t.line, t.col));
                    return Err(self.err(line, col, "missing '}'"));
                }
                return Ok(out);
            };
            let (line, col) = (t.line, t.col);
            let key = match &t.tok {
                Tok::Close if nested => {
                    self.at += 1;
                    return Ok(out);
                }
                Tok::Word(w) => w.clone(),
                _ => return Err(self.err(line, col, "expected a key")),
            };
            self.at += 1;
            if self.toks.get(self.at).map(|t| &t.tok) != Some(&Tok::Eq) {
                return Err(self.err(line, col, format!("expected '=' after {key}")));
            }
            self.at += 1;
            let value = self.value(&key, line, col)?;
            out.push((key, value, line, col));
        }
    }

    fn value(&mut self, key: &str, line: usize, col: usize) -> Result<Value, ConfigError> {
        match self.toks.get(self.at).map(|t| (&t.tok, t.line, t.col)) {
            Some((Tok::Open, ..)) => {
                self.at += 1;
                Ok(Value::Block(self.entries(true)?))
            }
            Some((Tok::Word(_) | Tok::Str(_), vline, vcol)) => {
                let mut words = Vec::new();
                while let Some(Tok::Word(w) | Tok::Str(w)) = self.toks.get(self.at).map(|t| &t.tok)
                {
                    words.push(w.clone());
                    self.at += 1;
                }
                Ok(Value::Text(words.join(" "), vline, vcol))
            }
            _ => Err(self.err(line, col, format!("{key} needs a value"))),
        }
    }
}

fn text(v: &Value) -> Option<(&str, usize, usize)> {
    match v {
        Value::Text(s, l, c) => Some((s, *l, *c)),
        Value::Block(_) => None,
    }
}

fn boolean(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "1" => Some(true),
        "off" | "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// Reads a `-A` file.
pub fn read(path: &Path) -> Result<TlsFile, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
    parse(&text, &path.display().to_string(), path.parent())
}

/// Parses the text of a `-A` file named `file`; relative paths in it are
/// taken from `dir`.
pub fn parse(text: &str, file: &str, dir: Option<&Path>) -> Result<TlsFile, ConfigError> {
    let mut p = Parser {
        toks: lex(text, file)?,
        at: 0,
        file,
    };
    let entries = p.entries(false)?;
    let mut out = TlsFile::default();
    let path = |s: &str| -> PathBuf {
        let p = PathBuf::from(s);
        match dir {
            Some(d) if p.is_relative() => d.join(p),
            _ => p,
        }
    };
    // The global settings first, wherever they stand: frontends start
    // from them (as in Hitch) and override what they name.
    let mut global = std::mem::take(&mut out.settings);
    let mut settings_keys = vec![false; entries.len()];
    for (i, (key, value, line, col)) in entries.iter().enumerate() {
        let at = |msg: String| ConfigError(format!("{file}:{line}:{col}: {msg}"));
        settings_keys[i] = settings_key(&mut global, key, value, &at)?;
    }
    out.settings = global;
    for ((key, value, line, col), setting) in entries.into_iter().zip(settings_keys) {
        let at = |msg: String| ConfigError(format!("{file}:{line}:{col}: {msg}"));
        if setting {
            continue;
        }
        match key.as_str() {
            "frontend" => out
                .frontends
                .push(frontend(&value, &at, &path, &out.settings)?),
            "pem-file" => out.pems.push(pem(&value, &at, &path)?),
            "pem-dir" => out.pem_dir = Some(path(need_text(&value, &key, &at)?)),
            "pem-dir-glob" => out.pem_dir_glob = Some(need_text(&value, &key, &at)?.to_string()),
            "alpn-protos" => {
                out.alpn = need_text(&value, &key, &at)?
                    .split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = out.alpn.iter().find(|a| !matches!(a.as_str(), "http/1.1" | "h2")) {
                    return Err(at(format!("alpn-protos: \"{bad}\" is not served (http/1.1, h2)")));
                }
                if out.alpn.is_empty() {
                    out.alpn.push("http/1.1".into());
                }
            }
            "session-cache" => {
                let v = need_text(&value, &key, &at)?;
                out.session_cache = v
                    .parse()
                    .map_err(|_| at(format!("session-cache: \"{v}\" is not a count")))?;
            }
            "ocsp-dir" => out.ocsp_dir = Some(path(need_text(&value, &key, &at)?)),
            "acme" => out.acme.push(acme(&value, file, &at, &path)?),
            "tls-handshake-timeout" | "ssl-handshake-timeout" => {
                let v = need_text(&value, &key, &at)?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| at(format!("{key}: \"{v}\" is not a number of seconds")))?;
                out.handshake_timeout = Duration::from_secs_f64(secs);
            }
            k if PROXY_ONLY.contains(&k) => out.warnings.push(format!(
                "{file}:{line}:{col}: {k} is for a separate TLS proxy; Lacquer terminates TLS itself and ignores it"
            )),
            other => return Err(at(format!("unknown key \"{other}\""))),
        }
    }
    // client-verify-ca is taken from the file's directory, as the others.
    let settings =
        std::iter::once(&mut out.settings).chain(out.frontends.iter_mut().map(|f| &mut f.settings));
    for s in settings {
        if let Some(ca) = &s.client_verify_ca {
            s.client_verify_ca = Some(path(&ca.to_string_lossy()));
        }
    }
    Ok(out)
}

fn need_text<'v>(
    v: &'v Value,
    key: &str,
    at: &dyn Fn(String) -> ConfigError,
) -> Result<&'v str, ConfigError> {
    text(v)
        .map(|(s, ..)| s)
        .ok_or_else(|| at(format!("{key} takes a value, not a block")))
}

/// A key every frontend may override; true when it was one.
fn settings_key(
    s: &mut Settings,
    key: &str,
    value: &Value,
    at: &dyn Fn(String) -> ConfigError,
) -> Result<bool, ConfigError> {
    match key {
        "tls-protos" => {
            let v = need_text(value, key, at)?;
            let mut protos = Vec::new();
            for p in v.split_whitespace() {
                match p {
                    "TLSv1.2" | "TLSv1.3" => protos.push(p.to_string()),
                    "SSLv3" | "TLSv1.0" | "TLSv1.1" => {
                        return Err(at(format!(
                            "tls-protos: {p} is not offered (it is broken); use TLSv1.2 and TLSv1.3"
                        )))
                    }
                    other => return Err(at(format!("tls-protos: unknown protocol \"{other}\""))),
                }
            }
            if protos.is_empty() {
                return Err(at("tls-protos: no protocol".into()));
            }
            s.protos = protos;
        }
        "ssl" | "tls" => {
            let v = need_text(value, key, at)?;
            if boolean(v) != Some(true) {
                return Err(at(format!("{key} = {v}: only TLS (on) is served")));
            }
        }
        "ciphers" => s.ciphers = Some(need_text(value, key, at)?.to_string()),
        "client-verify" => {
            s.client_verify = match need_text(value, key, at)? {
                "none" => ClientVerify::None,
                "optional" => ClientVerify::Optional,
                "required" => ClientVerify::Required,
                other => {
                    return Err(at(format!(
                        "client-verify: \"{other}\" is not none, optional or required"
                    )))
                }
            }
        }
        "client-verify-ca" => s.client_verify_ca = Some(PathBuf::from(need_text(value, key, at)?)),
        "ciphersuites" => s.ciphersuites = Some(need_text(value, key, at)?.to_string()),
        "prefer-server-ciphers" | "sni-nomatch-abort" | "quic" => {
            let v = need_text(value, key, at)?;
            let b = boolean(v).ok_or_else(|| at(format!("{key}: \"{v}\" is not on or off")))?;
            match key {
                "prefer-server-ciphers" => s.prefer_server_ciphers = b,
                "quic" => s.quic = b,
                _ => s.sni_nomatch_abort = b,
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn pem(
    v: &Value,
    at: &dyn Fn(String) -> ConfigError,
    path: &dyn Fn(&str) -> PathBuf,
) -> Result<PemSpec, ConfigError> {
    match v {
        Value::Text(s, ..) => Ok(PemSpec {
            cert: path(s),
            ..PemSpec::default()
        }),
        Value::Block(entries) => {
            let mut spec = PemSpec::default();
            let mut cert = None;
            for (key, value, ..) in entries {
                let s = need_text(value, key, at)?;
                match key.as_str() {
                    "cert" => cert = Some(path(s)),
                    "private-key" => spec.private_key = Some(path(s)),
                    "ocsp-resp-file" => spec.ocsp_resp_file = Some(path(s)),
                    other => return Err(at(format!("pem-file: unknown key \"{other}\""))),
                }
            }
            spec.cert = cert.ok_or_else(|| at("pem-file: no cert".into()))?;
            Ok(spec)
        }
    }
}

/// An `acme` section: `directory`, `names` and `contact`, with
/// `challenge`, `ca-file`, `renew-before` (days) and `retry` (seconds).
fn acme(
    v: &Value,
    file: &str,
    at: &dyn Fn(String) -> ConfigError,
    path: &dyn Fn(&str) -> PathBuf,
) -> Result<crate::acme::AcmeSpec, ConfigError> {
    use crate::acme::{AcmeSpec, ChallengeKind};
    let Value::Block(entries) = v else {
        return Err(at(
            "acme takes a block: acme = { directory = … names = … }".into()
        ));
    };
    let mut spec = AcmeSpec {
        directory: String::new(),
        contact: Vec::new(),
        names: Vec::new(),
        challenges: vec![ChallengeKind::TlsAlpn01, ChallengeKind::Http01],
        ca_file: None,
        renew_before: Duration::from_secs(30 * 86_400),
        retry: Duration::from_secs(600),
    };
    let words = |s: &str| -> Vec<String> {
        s.split([',', ' ', '\t'])
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    for (key, value, line, col) in entries {
        let at = |msg: String| ConfigError(format!("{file}:{line}:{col}: acme: {msg}"));
        let s = need_text(value, key, &at)?;
        let seconds = |scale: f64| -> Result<Duration, ConfigError> {
            s.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n > 0.0 && n * scale < 1e10)
                .map(|n| Duration::from_secs_f64(n * scale))
                .ok_or_else(|| at(format!("{key}: \"{s}\" is not a positive number")))
        };
        match key.as_str() {
            "directory" => {
                crate::acme::http::Url::parse(s).map_err(|e| at(format!("directory: {e}")))?;
                spec.directory = s.to_string();
            }
            "contact" => {
                spec.contact = words(s)
                    .into_iter()
                    .map(|c| match c.contains(':') {
                        true => c,
                        false => format!("mailto:{c}"),
                    })
                    .collect()
            }
            "names" => {
                spec.names = words(s).iter().map(|n| n.to_ascii_lowercase()).collect();
                if let Some(bad) = spec.names.iter().find(|n| {
                    n.starts_with('.')
                        || !n
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                }) {
                    return Err(at(format!(
                        "names: \"{bad}\" is not a host name (wildcards need DNS-01, which is not done)"
                    )));
                }
            }
            "challenge" => {
                spec.challenges = words(s)
                    .iter()
                    .map(|c| {
                        ChallengeKind::from_name(c).ok_or_else(|| {
                            at(format!("challenge: \"{c}\" is not tls-alpn-01 or http-01"))
                        })
                    })
                    .collect::<Result<_, _>>()?
            }
            "ca-file" => spec.ca_file = Some(path(s)),
            "renew-before" => spec.renew_before = seconds(86_400.0)?,
            "retry" => spec.retry = seconds(1.0)?,
            other => return Err(at(format!("unknown key \"{other}\""))),
        }
    }
    if spec.directory.is_empty() {
        return Err(at("acme: no directory".into()));
    }
    if spec.names.is_empty() {
        return Err(at("acme: no names".into()));
    }
    if spec.challenges.is_empty() {
        return Err(at("acme: no challenge".into()));
    }
    Ok(spec)
}

fn frontend(
    v: &Value,
    at: &dyn Fn(String) -> ConfigError,
    path: &dyn Fn(&str) -> PathBuf,
    global: &Settings,
) -> Result<Frontend, ConfigError> {
    let mut f = Frontend {
        host: String::new(),
        port: 443,
        pems: Vec::new(),
        match_global_certs: true,
        settings: global.clone(),
    };
    match v {
        Value::Text(s, ..) => {
            // "[host]:port", optionally "+/path/cert.pem"
            let (addr, pem) = match s.split_once('+') {
                Some((a, p)) => (a, Some(p)),
                None => (s.as_str(), None),
            };
            let (host, port) = host_port(addr)
                .ok_or_else(|| at(format!("frontend \"{s}\": expected \"[host]:port\"")))?;
            (f.host, f.port) = (host, port);
            if let Some(p) = pem {
                f.pems.push(PemSpec {
                    cert: path(p),
                    ..PemSpec::default()
                });
                f.match_global_certs = false;
            }
        }
        Value::Block(entries) => {
            let mut explicit_match = None;
            for (key, value, ..) in entries {
                if settings_key(&mut f.settings, key, value, at)? {
                    continue;
                }
                match key.as_str() {
                    "host" => f.host = need_text(value, key, at)?.trim_matches(['[', ']']).into(),
                    "port" => {
                        let v = need_text(value, key, at)?;
                        f.port = v
                            .parse()
                            .map_err(|_| at(format!("frontend: port \"{v}\" is not a port")))?;
                    }
                    "pem-file" => f.pems.push(pem(value, at, path)?),
                    "match-global-certs" => {
                        let v = need_text(value, key, at)?;
                        explicit_match = Some(boolean(v).ok_or_else(|| {
                            at(format!("match-global-certs: \"{v}\" is not on or off"))
                        })?);
                    }
                    other => return Err(at(format!("frontend: unknown key \"{other}\""))),
                }
            }
            f.match_global_certs = explicit_match.unwrap_or(f.pems.is_empty());
        }
    }
    if f.host == "*" {
        f.host.clear();
    }
    Ok(f)
}

/// `[host]:port`, `host:port` or `[::1]:443`.
fn host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        (h, p.strip_prefix(':')?)
    } else {
        s.rsplit_once(':')?
    };
    Some((host.to_string(), port.parse().ok()?))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
