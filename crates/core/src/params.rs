//! The parameter table: every tunable limit, declared once with Varnish's
//! name, default, unit, bounds and description. Values live in atomics so
//! that `param.set` can change them while requests run; readers pay one
//! relaxed load.

use crate::units::{format_bytes, parse_bool, parse_bytes, parse_duration, UnitError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The kind of a parameter: how its text is parsed and printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Seconds, stored as the bits of an `f64`.
    Seconds,
    /// A byte count.
    Bytes,
    /// A plain count.
    Count,
    /// A fraction from 0 to 1 (a probability), stored as the bits of an
    /// `f64`.
    Fraction,
    /// On or off.
    Bool,
    /// A set of named flags (`feature`): `+name`/`-name` lists.
    Features,
    /// Text, checked by its parameter's own rule ([`check_text`]).
    Text,
}

macro_rules! feature_table {
    ($( $name:ident: $help:literal; )*) => {
        /// The flags of the `feature` parameter, Varnish's names in its
        /// order, with their descriptions. A flag's bit is its index here.
        pub const FEATURES: &[(&str, &str)] = &[ $( (stringify!($name), $help), )* ];

        /// One flag of the `feature` parameter, by its name in [`FEATURES`].
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u32)]
        pub enum Feature {
            $( $name, )*
        }
    };
}

feature_table! {
    http2: "Enable HTTP/2 protocol support.";
    short_panic: "Short panic message.";
    no_coredump: "No coredumps.";
    https_scheme: "Extract host from full URI in the HTTP/1 request line, if the scheme is https.";
    http_date_postel: "Tolerate non compliant timestamp headers like `Date`, `Last-Modified`, `Expires` etc.";
    esi_ignore_https: "Convert `<esi:include src\"https://...` to `http://...`";
    esi_disable_xml_check: "Allow ESI processing on non-XML ESI bodies";
    esi_ignore_other_elements: "Ignore XML syntax errors in ESI bodies.";
    esi_remove_bom: "Ignore UTF-8 BOM in ESI bodies.";
    esi_include_onerror: "Parse the onerror attribute of <esi:include> tags.";
    wait_silo: "Wait for persistent silos to completely load before serving requests.";
    validate_headers: "Validate all header set operations to conform to RFC7230.";
    busy_stats_rate: "Make busy workers comply with thread_stats_rate.";
}

/// Applies a `feature` value (`+a,-b`, `none`, `default`) to `current`.
fn parse_features(text: &str, current: u64, default: u64) -> Result<u64, UnitError> {
    let mut bits = current;
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word {
            "none" => bits = 0,
            "default" => bits = default,
            _ => {
                let (on, name) = match word.as_bytes()[0] {
                    b'+' => (true, &word[1..]),
                    b'-' => (false, &word[1..]),
                    _ => (true, word),
                };
                let bit = FEATURES
                    .iter()
                    .position(|(n, _)| *n == name)
                    .ok_or_else(|| UnitError(format!("unknown feature \"{name}\"")))?;
                if on {
                    bits |= 1 << bit;
                } else {
                    bits &= !(1 << bit);
                }
            }
        }
    }
    Ok(bits)
}

fn format_features(bits: u64) -> String {
    let on: Vec<String> = FEATURES
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, (n, _))| format!("+{n}"))
        .collect();
    if on.is_empty() {
        "none".to_string()
    } else {
        on.join(",")
    }
}

impl Kind {
    fn parse(self, text: &str) -> Result<u64, UnitError> {
        match self {
            Kind::Seconds => parse_duration(text).map(f64::to_bits),
            Kind::Bytes => parse_bytes(text),
            Kind::Count => text
                .trim()
                .parse::<u64>()
                .map_err(|_| UnitError(format!("invalid number \"{text}\""))),
            Kind::Fraction => match text.trim().parse::<f64>() {
                Ok(v) if (0.0..=1.0).contains(&v) => Ok(v.to_bits()),
                _ => Err(UnitError(format!(
                    "invalid fraction \"{text}\" (from 0 to 1)"
                ))),
            },
            Kind::Bool => parse_bool(text).map(u64::from),
            Kind::Features => parse_features(text, 0, 0),
            // The text itself is kept beside the atomics.
            Kind::Text => Ok(0),
        }
    }

    fn format(self, raw: u64) -> String {
        match self {
            Kind::Seconds => format!("{:.3}", f64::from_bits(raw)),
            Kind::Bytes => format_bytes(raw),
            Kind::Count => raw.to_string(),
            Kind::Fraction => format!("{:.3}", f64::from_bits(raw)),
            Kind::Bool => if raw != 0 { "on" } else { "off" }.to_string(),
            Kind::Features => format_features(raw),
            Kind::Text => String::new(),
        }
    }

    /// Compares two raw values of this kind.
    fn less(self, a: u64, b: u64) -> bool {
        match self {
            Kind::Seconds | Kind::Fraction => f64::from_bits(a) < f64::from_bits(b),
            _ => a < b,
        }
    }
}

/// The static description of one parameter.
#[derive(Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub units: &'static str,
    pub min: Option<&'static str>,
    pub max: Option<&'static str>,
    pub doc: &'static str,
}

macro_rules! param_table {
    ($( $name:ident : $kind:ident, $default:literal, $units:literal, min $min:expr, max $max:expr, $doc:literal; )*) => {
        /// One identifier per parameter, in table order.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum ParamId { $( $name, )* }

        /// Every parameter, in table order.
        pub static PARAMS: &[ParamSpec] = &[
            $( ParamSpec {
                name: stringify!($name),
                kind: Kind::$kind,
                default: $default,
                units: $units,
                min: $min,
                max: $max,
                doc: $doc,
            }, )*
        ];

        impl Params {
            $(
                #[doc = $doc]
                #[inline]
                pub fn $name(&self) -> param_type!($kind) {
                    param_get!($kind, self, ParamId::$name as usize)
                }
            )*
        }
    };
}

macro_rules! param_type {
    (Seconds) => {
        f64
    };
    (Fraction) => {
        f64
    };
    (Bytes) => {
        u64
    };
    (Count) => {
        u64
    };
    (Bool) => {
        bool
    };
    (Features) => {
        u64
    };
    (Text) => {
        std::sync::Arc<str>
    };
}

macro_rules! param_get {
    (Seconds, $p:ident, $i:expr) => {
        f64::from_bits($p.values[$i].load(Ordering::Relaxed))
    };
    (Fraction, $p:ident, $i:expr) => {
        f64::from_bits($p.values[$i].load(Ordering::Relaxed))
    };
    (Bytes, $p:ident, $i:expr) => {
        $p.values[$i].load(Ordering::Relaxed)
    };
    (Count, $p:ident, $i:expr) => {
        $p.values[$i].load(Ordering::Relaxed)
    };
    (Bool, $p:ident, $i:expr) => {
        $p.values[$i].load(Ordering::Relaxed) != 0
    };
    (Features, $p:ident, $i:expr) => {
        $p.values[$i].load(Ordering::Relaxed)
    };
    (Text, $p:ident, $i:expr) => {
        $p.text($i)
    };
}

// The table itself, one entry a parameter, sorted by name.
mod table;
pub use table::{ParamId, PARAMS};

/// The live parameter values.
pub struct Params {
    values: Vec<AtomicU64>,
    /// The values of the text parameters (empty for the others).
    texts: Vec<RwLock<Arc<str>>>,
}

/// Why a parameter could not be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamError {
    Unknown(String),
    Invalid { name: String, reason: String },
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamError::Unknown(name) => write!(f, "unknown parameter \"{name}\""),
            ParamError::Invalid { name, reason } => write!(f, "parameter \"{name}\": {reason}"),
        }
    }
}

impl std::error::Error for ParamError {}

impl Default for Params {
    fn default() -> Self {
        let values = PARAMS
            .iter()
            .map(|spec| {
                let raw = spec
                    .kind
                    .parse(spec.default)
                    .unwrap_or_else(|e| panic!("default of {} does not parse: {e}", spec.name));
                AtomicU64::new(raw | text_raw(spec.name, spec.default))
            })
            .collect();
        let texts = PARAMS
            .iter()
            .map(|spec| {
                let text = if spec.kind == Kind::Text {
                    spec.default
                } else {
                    ""
                };
                RwLock::new(Arc::from(text))
            })
            .collect();
        Params { values, texts }
    }
}

impl Params {
    /// Finds a parameter by name.
    pub fn lookup(name: &str) -> Option<(usize, &'static ParamSpec)> {
        PARAMS
            .iter()
            .enumerate()
            .find(|(_, spec)| spec.name == name)
    }

    /// Sets a parameter from its text form, checking its bounds.
    pub fn set(&self, name: &str, text: &str) -> Result<(), ParamError> {
        let (index, spec) =
            Self::lookup(name).ok_or_else(|| ParamError::Unknown(name.to_string()))?;
        let invalid = |reason: String| ParamError::Invalid {
            name: name.to_string(),
            reason,
        };
        if spec.kind == Kind::Text {
            let text = text.trim();
            check_text(name, text).map_err(invalid)?;
            self.values[index].store(text_raw(name, text), Ordering::Relaxed);
            *self.texts[index].write().unwrap_or_else(|e| e.into_inner()) = Arc::from(text);
            return Ok(());
        }
        let raw = if spec.kind == Kind::Features {
            let current = self.values[index].load(Ordering::Relaxed);
            let default = spec.kind.parse(spec.default).unwrap_or(0);
            parse_features(text, current, default).map_err(|e| invalid(e.0))?
        } else {
            spec.kind.parse(text).map_err(|e| invalid(e.0))?
        };
        if spec.kind == Kind::Seconds && f64::from_bits(raw).is_nan() {
            return Err(invalid(format!("invalid value \"{text}\"")));
        }
        if let Some(min) = spec.min {
            let min_raw = spec.kind.parse(min).expect("table minimum parses");
            if spec.kind.less(raw, min_raw) {
                return Err(invalid(format!("Must be at least {min}")));
            }
        }
        if let Some(max) = spec.max {
            let max_raw = spec.kind.parse(max).expect("table maximum parses");
            if spec.kind.less(max_raw, raw) {
                return Err(invalid(format!("Must be no more than {max}")));
            }
        }
        self.values[index].store(raw, Ordering::Relaxed);
        Ok(())
    }

    /// Sets a `name=value` pair, as given to `-p`.
    pub fn set_pair(&self, pair: &str) -> Result<(), ParamError> {
        match pair.split_once('=') {
            Some((name, value)) => self.set(name.trim(), value),
            None => Err(ParamError::Invalid {
                name: pair.to_string(),
                reason: "expected name=value".to_string(),
            }),
        }
    }

    /// Puts a parameter back to its default.
    pub fn reset(&self, name: &str) -> Result<(), ParamError> {
        let (_, spec) = Self::lookup(name).ok_or_else(|| ParamError::Unknown(name.to_string()))?;
        self.set(name, spec.default)
    }

    /// Whether a parameter has its default value, by table index.
    pub fn is_default(&self, index: usize) -> bool {
        let spec = &PARAMS[index];
        if spec.kind == Kind::Text {
            return *self.text(index) == *spec.default;
        }
        spec.kind.parse(spec.default).ok() == Some(self.values[index].load(Ordering::Relaxed))
    }

    /// A parameter's value as text, by table index.
    pub fn show_index(&self, index: usize) -> String {
        match PARAMS[index].kind {
            Kind::Text => self.text(index).to_string(),
            kind => kind.format(self.values[index].load(Ordering::Relaxed)),
        }
    }

    /// The current value of a parameter as varnishd's `param.show -j`
    /// types it: a JSON number for counts, sizes in bytes and durations
    /// in seconds, `true` or `false` for a switch, else a string.
    pub fn json_value(&self, index: usize) -> String {
        let raw = self.values[index].load(Ordering::Relaxed);
        match PARAMS[index].kind {
            Kind::Seconds | Kind::Fraction => {
                let seconds = f64::from_bits(raw);
                if seconds.is_finite() {
                    format!("{seconds:?}")
                } else {
                    "null".to_string()
                }
            }
            Kind::Bytes | Kind::Count => raw.to_string(),
            Kind::Bool => (raw != 0).to_string(),
            Kind::Features | Kind::Text => crate::json::quote(&self.show_index(index)),
        }
    }

    /// The current value of a parameter, as text.
    pub fn show(&self, name: &str) -> Option<String> {
        let (index, _) = Self::lookup(name)?;
        Some(self.show_index(index))
    }

    /// A text parameter's value, by table index.
    pub fn text(&self, index: usize) -> Arc<str> {
        self.texts[index]
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A parameter's value as VCL sees it: seconds, bytes, a count or a
    /// flag, by the index `lookup` gave.
    pub fn raw(&self, index: usize) -> (Kind, u64) {
        (
            PARAMS[index].kind,
            self.values[index].load(Ordering::Relaxed),
        )
    }

    /// Whether a flag of the `feature` parameter is on.
    #[inline]
    pub fn has(&self, f: Feature) -> bool {
        self.feature() & (1 << f as u32) != 0
    }

    /// A duration parameter as a `Duration` (negative values clamp to zero).
    pub fn duration(seconds: f64) -> Duration {
        if seconds.is_nan() {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(seconds.clamp(0.0, 1e9))
    }
}

impl ParamSpec {
    /// The default as `param.show` prints values.
    pub fn default_shown(&self) -> String {
        if self.kind == Kind::Text {
            return self.default.to_string();
        }
        self.kind
            .format(self.kind.parse(self.default).unwrap_or_default())
    }

    /// A bound as `param.show` prints values.
    pub fn bound_shown(&self, bound: &str) -> String {
        self.kind.format(self.kind.parse(bound).unwrap_or_default())
    }
}

/// The text printed by `-x parameter`: every parameter with its default,
/// units, bounds and description.
pub fn describe_all() -> String {
    let mut out = String::new();
    for spec in PARAMS {
        let default = spec.default_shown();
        out.push_str(spec.name);
        out.push('\n');
        out.push_str(&"~".repeat(spec.name.len()));
        out.push('\n');
        if !spec.units.is_empty() && spec.kind != Kind::Bool {
            out.push_str(&format!("\t* Units: {}\n", spec.units));
        }
        if spec.kind == Kind::Bool {
            out.push_str("\t* Units: bool\n");
        }
        if spec.kind == Kind::Features {
            out.push_str(&format!("\t* Default: {default}\n\n{}\n\n", spec.doc));
            for (name, doc) in FEATURES {
                out.push_str(&format!("\t*{name}*\n\t\t{doc}\n\n"));
            }
            continue;
        }
        out.push_str(&format!("\t* Default: {default}\n"));
        if let Some(min) = spec.min {
            out.push_str(&format!("\t* Minimum: {min}\n"));
        }
        if let Some(max) = spec.max {
            out.push_str(&format!("\t* Maximum: {max}\n"));
        }
        out.push('\n');
        out.push_str(spec.doc);
        out.push_str("\n\n");
    }
    out
}

/// Checks a text parameter's value by its own rule: a `+name,-name` list
/// (`vsl_mask`, `debug`, `experimental`), three numbers (`pool_*`), a
/// fraction (`acceptor_sleep_decay`), or any text.
fn check_text(name: &str, text: &str) -> Result<(), String> {
    let flags = |t: &str| {
        t.split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .all(|w| {
                let w = w.strip_prefix(['+', '-']).unwrap_or(w);
                !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
    };
    match name {
        "http_encodings" => encoding_order(text).map(|_| ()),
        "vsl_mask" | "debug" | "experimental" if !flags(text) => {
            Err(format!("\"{text}\" is not a list of +name and -name"))
        }
        "pool_req" | "pool_sess" | "pool_vbo" => {
            let parts: Vec<&str> = text.split(',').map(str::trim).collect();
            let numbers = parts.len() == 3 && parts.iter().all(|p| p.parse::<f64>().is_ok());
            if numbers {
                Ok(())
            } else {
                Err(format!("\"{text}\" is not min_pool,max_pool,max_age"))
            }
        }
        "acceptor_sleep_decay" => match text.parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(()),
            _ => Err(format!("\"{text}\" is not a number from 0 to 1")),
        },
        _ => Ok(()),
    }
}

/// The content codings `http_encodings` may list, in the numbers its
/// packed form uses.
pub const ENCODINGS: [(&str, u64); 3] = [("gzip", 1), ("br", 2), ("zstd", 3)];

/// `http_encodings` packed four bits a coding, the first in the lowest
/// (see [`ENCODINGS`]).
fn encoding_order(text: &str) -> Result<u64, String> {
    let mut packed = 0u64;
    let names = text
        .split([',', ' '])
        .map(str::trim)
        .filter(|n| !n.is_empty());
    for (seen, name) in names.enumerate() {
        let Some(&(_, n)) = ENCODINGS.iter().find(|(e, _)| e.eq_ignore_ascii_case(name)) else {
            return Err(format!("\"{name}\" is not one of zstd, br and gzip"));
        };
        if (0..seen).any(|i| (packed >> (4 * i)) & 15 == n) {
            return Err(format!("\"{name}\" is listed twice"));
        }
        packed |= n << (4 * seen);
    }
    Ok(packed)
}

/// The number a text parameter keeps beside its text, for what reads it
/// per request without the text's lock: `http_encodings` packed.
fn text_raw(name: &str, text: &str) -> u64 {
    match name {
        "http_encodings" => encoding_order(text).unwrap_or(0),
        "debug" => debug_bits(text),
        _ => 0,
    }
}

/// The `debug` switches Lacquer acts on, a bit each by position.
const DEBUG_ACTED_ON: &[&str] = &["req_state"];

/// The bits of [`DEBUG_ACTED_ON`] a `debug` value turns on: each name's
/// last mention decides (`+name` or `name` on, `-name` off; `none` turns
/// all off).
fn debug_bits(text: &str) -> u64 {
    let mut bits = 0;
    for word in text.split(',').map(str::trim) {
        if word == "none" {
            bits = 0;
            continue;
        }
        let (on, name) = match word.strip_prefix('-') {
            Some(name) => (false, name),
            None => (true, word.strip_prefix('+').unwrap_or(word)),
        };
        if let Some(bit) = DEBUG_ACTED_ON.iter().position(|n| *n == name) {
            match on {
                true => bits |= 1 << bit,
                false => bits &= !(1 << bit),
            }
        }
    }
    bits
}

impl Params {
    /// `debug=+req_state`: each client step is logged (`Debug`), as
    /// varnishd logs them. Read per request.
    pub fn debug_req_state(&self) -> bool {
        self.values[ParamId::debug as usize].load(Ordering::Relaxed) & 1 != 0
    }

    /// `http_encodings` packed (see [`ENCODINGS`]): read per request.
    pub fn encoding_order(&self) -> u64 {
        self.values[ParamId::http_encodings as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
