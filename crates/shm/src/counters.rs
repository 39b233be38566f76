//! The counters segment, `_.counters` in the work directory: a header,
//! every counter's value, then what describes them (name, kind, doc), so
//! that a reader needs no table of its own. The daemon copies the values
//! from its atomics into the segment every [`PUBLISH_INTERVAL`] (Varnish's
//! workers likewise fold their counts into the shared ones as they go);
//! readers see a consistent copy through a sequence number that is odd
//! while a copy is being written.
//!
//! Layout (little-endian u64s): magic `LQCNTRS1`, sequence, count,
//! description length, then `count` values, then the description: one
//! line per counter, `name<TAB>kind<TAB>doc`.

use lacquer_core::counters::{CounterKind, COUNTERS, MAIN};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const FILE_NAME: &str = "_.counters";
const MAGIC: &[u8; 8] = b"LQCNTRS1";
const HEADER: usize = 32;
/// How often the daemon publishes its counters.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

/// The daemon's side: the segment it writes.
pub struct Publisher {
    file: File,
    sequence: u64,
    buf: Vec<u8>,
}

impl Publisher {
    /// Creates the segment with its description and current values.
    pub fn create(workdir: &Path) -> Result<Publisher, String> {
        let path = workdir.join(FILE_NAME);
        let file =
            File::create(&path).map_err(|e| format!("Cannot create {}: {e}", path.display()))?;
        let mut desc = String::new();
        for c in MAIN {
            let kind = match c.kind {
                CounterKind::Counter => "counter",
                CounterKind::Gauge => "gauge",
            };
            desc.push_str(&format!("MAIN.{}\t{kind}\t{}\n", c.name, c.doc));
        }
        let mut head = Vec::with_capacity(HEADER);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&0u64.to_le_bytes());
        head.extend_from_slice(&(MAIN.len() as u64).to_le_bytes());
        head.extend_from_slice(&(desc.len() as u64).to_le_bytes());
        let write = |data: &[u8], at: usize| {
            file.write_all_at(data, at as u64)
                .map_err(|e| format!("Cannot write {}: {e}", path.display()))
        };
        write(&head, 0)?;
        write(desc.as_bytes(), HEADER + 8 * MAIN.len())?;
        let mut p = Publisher {
            file,
            sequence: 0,
            buf: Vec::with_capacity(8 * MAIN.len()),
        };
        p.publish();
        Ok(p)
    }

    /// Copies the current values into the segment.
    pub fn publish(&mut self) {
        self.buf.clear();
        for i in 0..MAIN.len() {
            self.buf
                .extend_from_slice(&COUNTERS.get_index(i).to_le_bytes());
        }
        self.sequence += 1;
        let _ = self.file.write_all_at(&self.sequence.to_le_bytes(), 8);
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
    pub kind: String,
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
    file.read_exact_at(&mut head, 0).map_err(|_| corrupt())?;
    if &head[..8] != MAGIC {
        return Err(corrupt());
    }
    let count = u64_at(&head, 16) as usize;
    let desc_len = u64_at(&head, 24) as usize;
    if count > 1 << 16 || desc_len > 1 << 24 {
        return Err(corrupt());
    }
    let mut desc = vec![0u8; desc_len];
    file.read_exact_at(&mut desc, (HEADER + 8 * count) as u64)
        .map_err(|_| corrupt())?;
    let desc = String::from_utf8(desc).map_err(|_| corrupt())?;
    let mut values = vec![0u8; 8 * count];
    let mut seq = [0u8; 8];
    for _ in 0..1000 {
        file.read_exact_at(&mut seq, 8).map_err(|_| corrupt())?;
        let before = u64::from_le_bytes(seq);
        if before & 1 == 1 {
            std::thread::yield_now();
            continue;
        }
        file.read_exact_at(&mut values, HEADER as u64)
            .map_err(|_| corrupt())?;
        file.read_exact_at(&mut seq, 8).map_err(|_| corrupt())?;
        if u64::from_le_bytes(seq) == before {
            let mut out = Vec::with_capacity(count);
            for (i, line) in desc.lines().enumerate().take(count) {
                let mut parts = line.splitn(3, '\t');
                out.push(Reading {
                    name: parts.next().unwrap_or("").to_string(),
                    kind: parts.next().unwrap_or("").to_string(),
                    doc: parts.next().unwrap_or("").to_string(),
                    value: u64_at(&values, 8 * i),
                });
            }
            return Ok(out);
        }
    }
    Err(corrupt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lacquer_core::counters::Counter;

    #[test]
    fn a_reader_sees_what_was_published() {
        let dir = std::env::temp_dir().join(format!("lacquer-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Missing(_))));
        let mut p = Publisher::create(&dir).unwrap();
        COUNTERS.add(Counter::n_purges, 5);
        p.publish();
        let all = read(&dir).unwrap();
        assert_eq!(all.len(), MAIN.len());
        let purges = all.iter().find(|r| r.name == "MAIN.n_purges").unwrap();
        assert!(purges.value >= 5);
        assert_eq!(purges.kind, "counter");
        assert_eq!(purges.doc, "Purge operations executed.");
        let n_object = all.iter().find(|r| r.name == "MAIN.n_object").unwrap();
        assert_eq!(n_object.kind, "gauge");
        std::fs::write(dir.join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
