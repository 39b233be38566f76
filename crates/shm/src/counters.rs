//! The counters segment, `_.counters` in the work directory: a header,
//! every counter's value, then what describes them (name, kind, unit,
//! doc), so that a reader needs no table of its own. The daemon copies
//! the values from its atomics into the segment every
//! [`PUBLISH_INTERVAL`] (Varnish's workers likewise fold their counts into
//! the shared ones as they go): `MAIN.*` first, then the sections the
//! daemon adds (`SMA.<store>.*`, `VBE.<vcl>.<backend>.*`), which come and
//! go as programs are loaded and discarded. Readers see a consistent copy
//! of values and descriptions through a sequence number that is odd while
//! a copy is being written.
//!
//! Layout (little-endian u64s): magic `LQCNTRS2`, sequence, count,
//! description length, then `count` values, then the description: one
//! line per counter, `name<TAB>kind<TAB>unit<TAB>doc`.

use lacquer_core::counters::{CounterSpec, COUNTERS, MAIN};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const FILE_NAME: &str = "_.counters";
const MAGIC: &[u8; 8] = b"LQCNTRS2";
const HEADER: usize = 32;
/// How often the daemon publishes its counters.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

/// The counters of one publication: `MAIN`, then the daemon's sections.
#[derive(Default)]
pub struct Snapshot {
    sections: Vec<(String, &'static [CounterSpec])>,
    values: Vec<u64>,
}

impl Snapshot {
    /// Adds a section: counters named `<prefix>.<field>` for each field of
    /// `table`, whose values `fill` pushes in table order.
    pub fn section(
        &mut self,
        prefix: String,
        table: &'static [CounterSpec],
        fill: impl FnOnce(&mut Vec<u64>),
    ) {
        let before = self.values.len();
        fill(&mut self.values);
        self.values.resize(before + table.len(), 0);
        self.sections.push((prefix, table));
    }

    /// A snapshot holding the current `MAIN` values, for sections to be
    /// added to.
    pub fn main() -> Snapshot {
        let mut snap = Snapshot::default();
        COUNTERS.snapshot(&mut snap.values);
        snap
    }

    /// The `MAIN` values, in table order.
    pub fn main_values(&self) -> &[u64] {
        &self.values[..MAIN.len()]
    }

    /// Each section: its prefix, its table and its values.
    pub fn sections(&self) -> impl Iterator<Item = (&str, &'static [CounterSpec], &[u64])> {
        let mut at = MAIN.len();
        self.sections.iter().map(move |(prefix, table)| {
            let values = &self.values[at..at + table.len()];
            at += table.len();
            (prefix.as_str(), *table, values)
        })
    }

    fn clear(&mut self) {
        self.sections.clear();
        self.values.clear();
    }

    fn same_shape(&self, other: &Snapshot) -> bool {
        self.sections.len() == other.sections.len()
            && self
                .sections
                .iter()
                .zip(&other.sections)
                .all(|(a, b)| a.0 == b.0 && std::ptr::eq(a.1, b.1))
    }

    fn description(&self) -> String {
        let mut desc = String::new();
        let mut line = |prefix: &str, c: &CounterSpec| {
            desc.push_str(&format!(
                "{prefix}.{}\t{}\t{}\t{}\n",
                c.name,
                c.kind.name(),
                c.unit.name(),
                c.doc
            ))
        };
        for c in MAIN {
            line("MAIN", c);
        }
        for (prefix, table) in &self.sections {
            for c in table.iter() {
                line(prefix, c);
            }
        }
        desc
    }
}

/// What the daemon adds to `MAIN` at each publication.
pub type Sections = Box<dyn FnMut(&mut Snapshot) + Send>;

/// The daemon's side: the segment it writes.
pub struct Publisher {
    file: File,
    sequence: u64,
    sections: Sections,
    /// What the segment holds now, and the publication being made.
    published: Snapshot,
    next: Snapshot,
    buf: Vec<u8>,
}

impl Publisher {
    /// Creates the segment with its description and current values.
    pub fn create(workdir: &Path, sections: Sections) -> Result<Publisher, String> {
        let path = workdir.join(FILE_NAME);
        let file =
            File::create(&path).map_err(|e| format!("Cannot create {}: {e}", path.display()))?;
        file.write_all_at(MAGIC, 0)
            .map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
        let mut p = Publisher {
            file,
            sequence: 0,
            sections,
            published: Snapshot::default(),
            next: Snapshot::default(),
            buf: Vec::new(),
        };
        p.write(true);
        Ok(p)
    }

    /// Copies the current values into the segment, and the description
    /// too when sections came or went.
    pub fn publish(&mut self) {
        self.write(false)
    }

    fn write(&mut self, first: bool) {
        self.next.clear();
        COUNTERS.snapshot(&mut self.next.values);
        (self.sections)(&mut self.next);
        let reshaped = first || !self.next.same_shape(&self.published);
        std::mem::swap(&mut self.next, &mut self.published);
        let snap = &self.published;
        self.buf.clear();
        for v in &snap.values {
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        let values_len = self.buf.len();
        if reshaped {
            self.buf.extend_from_slice(snap.description().as_bytes());
        }
        self.sequence += 1;
        let _ = self.file.write_all_at(&self.sequence.to_le_bytes(), 8);
        if reshaped {
            let mut head = [0u8; 16];
            head[..8].copy_from_slice(&(snap.values.len() as u64).to_le_bytes());
            head[8..].copy_from_slice(&((self.buf.len() - values_len) as u64).to_le_bytes());
            let _ = self.file.write_all_at(&head, 16);
            let _ = self.file.set_len((HEADER + self.buf.len()) as u64);
        }
        let _ = self.file.write_all_at(&self.buf, HEADER as u64);
        self.sequence += 1;
        let _ = self.file.write_all_at(&self.sequence.to_le_bytes(), 8);
    }
}

/// Publishes every [`PUBLISH_INTERVAL`] on a thread of its own.
pub fn spawn_publisher(mut p: Publisher) -> Result<(), String> {
    std::thread::Builder::new()
        .name("counters".into())
        .spawn(move || loop {
            std::thread::sleep(PUBLISH_INTERVAL);
            p.publish();
        })
        .map(|_| ())
        .map_err(|e| format!("Cannot start the counter publisher: {e}"))
}

/// One counter as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub name: String,
    /// `counter`, `gauge` or `bitmap`.
    pub kind: String,
    /// `count`, `bytes`, `seconds` or `bits`.
    pub unit: String,
    pub doc: String,
    pub value: u64,
}

/// Why the counters could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// No segment: no daemon has run with this work directory.
    Missing(PathBuf),
    /// Not a counters segment, or cut short.
    Corrupt(PathBuf),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Missing(p) => write!(
                f,
                "Cannot open {}: is lacquer running with this -n?",
                p.display()
            ),
            ReadError::Corrupt(p) => write!(f, "{} is not a counters segment", p.display()),
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Reads every counter of the instance in `workdir`, consistently.
pub fn read(workdir: &Path) -> Result<Vec<Reading>, ReadError> {
    let path = workdir.join(FILE_NAME);
    let file = File::open(&path).map_err(|_| ReadError::Missing(path.clone()))?;
    let corrupt = || ReadError::Corrupt(path.clone());
    let mut head = [0u8; HEADER];
    let mut body = Vec::new();
    let mut seq = [0u8; 8];
    for _ in 0..1000 {
        file.read_exact_at(&mut head, 0).map_err(|_| corrupt())?;
        if &head[..8] != MAGIC {
            return Err(corrupt());
        }
        let before = u64_at(&head, 8);
        let count = u64_at(&head, 16) as usize;
        let desc_len = u64_at(&head, 24) as usize;
        if before & 1 == 1 || count > 1 << 20 || desc_len > 1 << 28 {
            std::thread::yield_now();
            continue;
        }
        body.resize(8 * count + desc_len, 0);
        // The segment may shrink under the read while sections go.
        let read = file.read_exact_at(&mut body, HEADER as u64);
        file.read_exact_at(&mut seq, 8).map_err(|_| corrupt())?;
        if read.is_err() || u64::from_le_bytes(seq) != before {
            std::thread::yield_now();
            continue;
        }
        let desc = std::str::from_utf8(&body[8 * count..]).map_err(|_| corrupt())?;
        let mut out = Vec::with_capacity(count);
        for (i, line) in desc.lines().enumerate().take(count) {
            let mut parts = line.splitn(4, '\t');
            let mut next = || parts.next().unwrap_or("").to_string();
            out.push(Reading {
                name: next(),
                kind: next(),
                unit: next(),
                doc: next(),
                value: u64_at(&body, 8 * i),
            });
        }
        return Ok(out);
    }
    Err(corrupt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_core::counters::{Counter, VBE};

    #[test]
    fn a_reader_sees_what_was_published() {
        let dir = std::env::temp_dir().join(format!("lacquer-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Missing(_))));
        let backends = std::sync::Arc::new(std::sync::Mutex::new(vec!["boot.a"]));
        let listed = backends.clone();
        let mut p = Publisher::create(
            &dir,
            Box::new(move |snap: &mut Snapshot| {
                for (i, name) in listed.lock().unwrap().iter().enumerate() {
                    snap.section(format!("VBE.{name}"), VBE, |v| {
                        v.extend((0..VBE.len() as u64).map(|f| 100 * i as u64 + f))
                    });
                }
            }),
        )
        .unwrap();
        COUNTERS.add(Counter::n_purges, 5);
        p.publish();
        let all = read(&dir).unwrap();
        assert_eq!(all.len(), MAIN.len() + VBE.len());
        let req = all.iter().find(|r| r.name == "VBE.boot.a.req").unwrap();
        assert_eq!((req.value, req.kind.as_str()), (9, "counter"));
        let happy = all.iter().find(|r| r.name == "VBE.boot.a.happy").unwrap();
        assert_eq!(
            (happy.kind.as_str(), happy.unit.as_str()),
            ("bitmap", "bits")
        );
        // A section that comes and one that goes are seen at once.
        *backends.lock().unwrap() = vec!["boot.b", "boot.c"];
        p.publish();
        let all = read(&dir).unwrap();
        assert_eq!(all.len(), MAIN.len() + 2 * VBE.len());
        assert!(!all.iter().any(|r| r.name.starts_with("VBE.boot.a.")));
        let req = all.iter().find(|r| r.name == "VBE.boot.c.req").unwrap();
        assert_eq!(req.value, 109);
        *backends.lock().unwrap() = vec![];
        p.publish();
        assert_eq!(read(&dir).unwrap().len(), MAIN.len());
        let purges = all.iter().find(|r| r.name == "MAIN.n_purges").unwrap();
        assert!(purges.value >= 5);
        assert_eq!(purges.kind, "counter");
        assert_eq!(purges.doc, "Purge operations executed.");
        let n_object = all.iter().find(|r| r.name == "MAIN.n_object").unwrap();
        assert_eq!(n_object.kind, "gauge");
        let uptime = all.iter().find(|r| r.name == "MAIN.uptime").unwrap();
        assert_eq!(uptime.unit, "seconds");
        std::fs::write(dir.join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
