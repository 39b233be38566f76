//! Macros: `${name}` replaced by its value in every word a test reads.
//! Actors define theirs as they come up (`${s1_sock}`, `${v1_port}`);
//! `${date}` and `${string,repeat,N,TEXT}` are computed. A name that is
//! not defined fails the test.

use crate::trace::{Fail, Step};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Macros {
    table: Mutex<HashMap<String, String>>,
    /// `feature ignore_unknown_macro`: an unknown macro stays as written.
    lenient: AtomicBool,
}

impl Macros {
    pub fn new() -> Macros {
        Macros::default()
    }

    pub fn define(&self, name: &str, value: &str) {
        self.lock().insert(name.to_string(), value.to_string());
    }

    /// `${P_addr}`, `${P_port}` and `${P_sock}` for an endpoint.
    pub fn define_endpoint(&self, prefix: &str, ip: &str, port: &str) {
        self.define(&format!("{prefix}_addr"), ip);
        self.define(&format!("{prefix}_port"), port);
        let sock = if port == "-" {
            ip.to_string()
        } else if ip.contains(':') {
            format!("[{ip}]:{port}")
        } else {
            format!("{ip}:{port}")
        };
        self.define(&format!("{prefix}_sock"), &sock);
    }

    pub fn ignore_unknown(&self) {
        self.lenient.store(true, Ordering::Relaxed);
    }

    pub fn get(&self, name: &str) -> Option<String> {
        self.lock().get(name).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces every `${...}` in `text`.
    pub fn expand(&self, text: &str) -> Step<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                return Err(Fail(format!("Macro ${{ not closed in \"{text}\"")));
            };
            out.push_str(&self.value(&after[..end])?);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn value(&self, name: &str) -> Step<String> {
        let mut parts = name.split(',');
        match parts.next() {
            Some("date") if !name.contains(',') => {
                Ok(httpdate::fmt_http_date(std::time::SystemTime::now()))
            }
            Some("string") => {
                let (Some("repeat"), Some(n), Some(s)) = (parts.next(), parts.next(), parts.next())
                else {
                    return Err(Fail(format!(
                        "Macro ${{{name}}}: use ${{string,repeat,N,TEXT}}"
                    )));
                };
                let n: usize = n
                    .trim()
                    .parse()
                    .map_err(|_| Fail(format!("Macro ${{{name}}}: bad count \"{n}\"")))?;
                Ok(s.repeat(n))
            }
            _ => match self.get(name) {
                Some(v) => Ok(v),
                None if self.lenient.load(Ordering::Relaxed) => Ok(format!("${{{name}}}")),
                None => Err(Fail(format!("Macro ${{{name}}} not found"))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_defined_and_computed_macros() {
        let m = Macros::new();
        m.define("s1_sock", "127.0.0.1:80");
        assert_eq!(m.expand("a ${s1_sock} b").unwrap(), "a 127.0.0.1:80 b");
        assert_eq!(m.expand("${string,repeat,3,ab}").unwrap(), "ababab");
        assert!(m.expand("${date}").unwrap().ends_with(" GMT"));
        assert_eq!(m.expand("no macro $x {y}").unwrap(), "no macro $x {y}");
        let e = m.expand("${missing}").unwrap_err();
        assert_eq!(e.0, "Macro ${missing} not found");
    }
}
