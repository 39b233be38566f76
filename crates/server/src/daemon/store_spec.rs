//! The stores `-s` names, read as varnishd reads them: `malloc` with an
//! optional size, `file` with a path, size, granularity and advice, and
//! `persistent` (or `deprecated_persistent`) with a path and a size.
//! Opening them is `daemon::storage`'s.

use lacquer_core::units::parse_bytes;
use std::path::PathBuf;

/// A storage backend from `-s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    pub name: String,
    /// Its byte budget (a file's size; a persistent store manages its
    /// own).
    pub budget: u64,
    pub kind: StoreKind,
}

/// Where a store keeps its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    Malloc,
    File(lacquer_cache::file::FileSpec),
    Persistent(lacquer_cache::persist::PersistSpec),
}

/// A store's size where `-s` gives none.
pub const DEFAULT_STORE_SIZE: u64 = 256 << 20;

/// Parses `-s [name=]malloc[,SIZE]`, `-s [name=]file,PATH[,SIZE[,GRANULARITY[,ADVICE]]]`
/// and `-s [name=]persistent,PATH,SIZE` (`deprecated_persistent` too).
pub fn parse_storage(spec: &str, index: usize) -> Result<StoreSpec, String> {
    let (name, rest) = match spec.split_once('=') {
        Some((n, r)) => (n.to_string(), r),
        None => (format!("s{index}"), spec),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("-s {spec}: invalid storage name \"{name}\""));
    }
    let mut parts = rest.split(',');
    let kind = parts.next().unwrap_or("");
    let args: Vec<&str> = parts.collect();
    let size = |s: Option<&&str>| -> Result<Option<u64>, String> {
        match s {
            None | Some(&"") => Ok(None),
            Some(size) if size.ends_with('%') => Err(format!(
                "-s {spec}: a size in percent of the disk is not supported; give bytes (10g)"
            )),
            Some(size) => {
                let b = parse_bytes(size).map_err(|e| format!("-s {spec}: {e}"))?;
                if b < 1024 * 1024 {
                    return Err(format!("-s {spec}: size must be at least 1m"));
                }
                Ok(Some(b))
            }
        }
    };
    let too_many = |n: usize| {
        if args.len() > n {
            Err(format!("-s {spec}: too many arguments"))
        } else {
            Ok(())
        }
    };
    let path = |what: &str| -> Result<PathBuf, String> {
        match args.first() {
            Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
            _ => Err(format!("-s {spec}: {what} storage needs a path")),
        }
    };
    let (budget, kind) = match kind {
        "malloc" | "default" => {
            too_many(1)?;
            let budget = size(args.first())?.unwrap_or(DEFAULT_STORE_SIZE);
            (budget, StoreKind::Malloc)
        }
        "file" => {
            too_many(4)?;
            let path = path("file")?;
            let size = size(args.get(1))?;
            if size.is_none() && !path.is_file() {
                return Err(format!(
                    "-s {spec}: give a size unless the file exists (its size is used)"
                ));
            }
            let granularity = match args.get(2) {
                None | Some(&"") => 4096,
                Some(g) => match parse_bytes(g) {
                    Ok(g) if g > 0 && g <= 1 << 30 => g,
                    _ => return Err(format!("-s {spec}: invalid granularity \"{g}\"")),
                },
            };
            let random = match args.get(3) {
                None | Some(&"") | Some(&"random") => true,
                Some(&"normal") => false,
                Some(a) => {
                    return Err(format!(
                        "-s {spec}: advice must be normal or random, not \"{a}\""
                    ))
                }
            };
            let budget = size.unwrap_or_else(|| std::fs::metadata(&path).map_or(0, |m| m.len()));
            let file = lacquer_cache::file::FileSpec {
                path,
                size,
                granularity,
                random,
            };
            (budget, StoreKind::File(file))
        }
        "persistent" | "deprecated_persistent" => {
            too_many(2)?;
            let path = path("persistent")?;
            let Some(size) = size(args.get(1))? else {
                return Err(format!("-s {spec}: persistent storage needs a size"));
            };
            let spec = lacquer_cache::persist::PersistSpec { path, size };
            (size, StoreKind::Persistent(spec))
        }
        "umem" => {
            return Err(format!(
                "-s {spec}: storage type \"umem\" is Solaris-only (use malloc)"
            ))
        }
        _ => return Err(format!("-s {spec}: unknown storage type \"{kind}\"")),
    };
    Ok(StoreSpec { name, budget, kind })
}
