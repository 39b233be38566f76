//! The `file` engine (`-s name=file,PATH[,SIZE[,GRANULARITY[,ADVICE]]]`):
//! bodies live in a file of a fixed size rather than on the heap, so the
//! cache can be larger than memory, the kernel's page cache keeping what
//! is read most. As in Varnish it is not persistent: every start begins
//! empty. Room is set aside in whole granules by best fit from a free
//! list that merges neighbours as they come back; a fill that finds no
//! room evicts (least recently used first, at most `nuke_limit`) and
//! tries again.

use crate::object::Object;
use crate::space::{FileSpace, Release, Room};
use crate::store::{Engine, Placement};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest room one allocation sets aside; a longer body takes
/// several, so that it needs no single free run of its whole length.
const MAX_ROOM: u64 = 64 << 20;

/// A free extent shorter than this many granules counts as a fragment
/// (`g_smf_frag`); longer ones as large (`g_smf_large`).
const SMALL_RUN: u64 = 16;

/// The free runs of the file.
#[derive(Debug)]
struct Extents {
    granularity: u64,
    /// Free runs by where they start (start → length).
    by_at: BTreeMap<u64, u64>,
    /// The same runs by length, for best fit.
    by_len: BTreeSet<(u64, u64)>,
    /// Rooms handed out and not yet back.
    taken: u64,
}

impl Extents {
    fn new(len: u64, granularity: u64) -> Extents {
        let usable = len / granularity * granularity;
        let mut e = Extents {
            granularity,
            by_at: BTreeMap::new(),
            by_len: BTreeSet::new(),
            taken: 0,
        };
        if usable > 0 {
            e.insert(0, usable);
        }
        e
    }

    fn round(&self, len: u64) -> u64 {
        len.max(1).div_ceil(self.granularity) * self.granularity
    }

    fn insert(&mut self, at: u64, len: u64) {
        self.by_at.insert(at, len);
        self.by_len.insert((len, at));
    }

    fn remove(&mut self, at: u64, len: u64) {
        self.by_at.remove(&at);
        self.by_len.remove(&(len, at));
    }

    /// The smallest free run of at least `len` bytes (rounded), split.
    fn take(&mut self, len: u64) -> Option<(u64, u64)> {
        let len = self.round(len);
        let &(run, at) = self.by_len.range((len, 0)..).next()?;
        self.remove(at, run);
        if run > len {
            self.insert(at + len, run - len);
        }
        self.taken += 1;
        Some((at, len))
    }

    /// Gives a run back, merged with free neighbours.
    fn give(&mut self, at: u64, len: u64) {
        let (mut at, mut len) = (at, self.round(len));
        if let Some((&prev, &plen)) = self.by_at.range(..at).next_back() {
            if prev + plen == at {
                self.remove(prev, plen);
                at = prev;
                len += plen;
            }
        }
        if let Some(&nlen) = self.by_at.get(&(at + len)) {
            self.remove(at + len, nlen);
            len += nlen;
        }
        self.insert(at, len);
    }

    /// Gives back the tail of a room still held (not a whole room).
    fn give_tail(&mut self, at: u64, len: u64) {
        // Only whole granules go back; `at` is inside a granule the room
        // keeps when it is not on a boundary.
        let start = at.div_ceil(self.granularity) * self.granularity;
        let end = at + len;
        if end > start {
            self.taken += 1;
            self.give(start, end - start);
        }
    }
}

/// The shared free list, which rooms give themselves back to.
#[derive(Debug)]
struct FreeList(Mutex<Extents>);

impl FreeList {
    fn lock(&self) -> std::sync::MutexGuard<'_, Extents> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Release for FreeList {
    fn release(&self, at: u64, len: u64) {
        if len == 0 {
            return;
        }
        let mut e = self.lock();
        e.taken = e.taken.saturating_sub(1);
        e.give(at, len);
    }
}

/// The engine of one `-s file` store.
#[derive(Debug)]
pub struct FileEngine {
    space: Arc<FileSpace>,
    free: Arc<FreeList>,
    path: PathBuf,
}

/// What `-s file` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    pub path: PathBuf,
    /// None: the existing file's size.
    pub size: Option<u64>,
    pub granularity: u64,
    /// `random` (the default) or `normal` read-ahead.
    pub random: bool,
}

impl FileEngine {
    /// Opens (or makes) the file: a directory gets a new file in it,
    /// removed at once so that nothing is left behind; a file is used as
    /// it is, resized to `size` and its blocks set aside.
    pub fn open(spec: &FileSpec) -> Result<FileEngine, String> {
        let (file, path) = open_file(&spec.path)?;
        let size = match spec.size {
            Some(s) => s,
            None => file.metadata().map(|m| m.len()).unwrap_or(0),
        };
        if size < spec.granularity.max(1 << 20) {
            return Err(format!(
                "{}: size must be at least 1m (and one granule)",
                path.display()
            ));
        }
        file.set_len(size)
            .and_then(|_| lacquer_shm::mapped::preallocate(&file, size))
            .map_err(|e| format!("{}: cannot set aside {size} bytes: {e}", path.display()))?;
        let space = FileSpace::new(file, spec.random)
            .map_err(|e| format!("{}: cannot map: {e}", path.display()))?;
        Ok(FileEngine {
            free: Arc::new(FreeList(Mutex::new(Extents::new(size, spec.granularity)))),
            space,
            path,
        })
    }

    /// The file's path (of the removed file, for a directory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.space.len()
    }
}

/// Opens `path` for a store: a new, already removed file in it when it is
/// a directory.
pub(crate) fn open_file(path: &Path) -> Result<(File, PathBuf), String> {
    if path.is_dir() {
        let name = path.join(format!(".lacquer-file-{}", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&name)
            .map_err(|e| format!("{}: cannot create: {e}", name.display()))?;
        let _ = std::fs::remove_file(&name);
        return Ok((file, name));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
    Ok((file, path.to_path_buf()))
}

impl Engine for FileEngine {
    fn keeps_on_heap(&self, _len: u64) -> bool {
        false
    }

    fn kind(&self) -> &'static str {
        "file"
    }

    fn section(&self) -> &'static str {
        "SMF"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn allocate(
        &self,
        need: u64,
        hint: u64,
        _started: bool,
        _obj: &Arc<Object>,
        _evicted: &mut Vec<Arc<Object>>,
    ) -> Placement {
        let want = hint.max(need).min(MAX_ROOM.max(need));
        let mut free = self.free.lock();
        let got = free.take(want).or_else(|| free.take(need));
        drop(free);
        match got {
            Some((at, len)) => {
                Placement::Room(Room::new(self.space.clone(), at, len, self.free.clone()))
            }
            None => Placement::Full,
        }
    }

    fn trim(&self, room: Room) {
        room.trim(|at, len| self.free.lock().give_tail(at, len));
    }

    fn extra_counters(&self, out: &mut Vec<u64>) {
        let free = self.free.lock();
        let runs = free.by_len.len() as u64;
        let small = free
            .by_len
            .range(..(SMALL_RUN * free.granularity, 0))
            .count() as u64;
        out.push(free.taken + runs);
        out.push(small);
        out.push(runs - small);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_splits_and_merges_back() {
        let mut e = Extents::new(10 * 4096, 4096);
        let a = e.take(100).unwrap();
        let b = e.take(5000).unwrap();
        let c = e.take(4096).unwrap();
        assert_eq!(a, (0, 4096));
        assert_eq!(b, (4096, 8192));
        assert_eq!(c, (12288, 4096));
        assert_eq!(e.by_at.len(), 1);
        e.give(b.0, b.1);
        assert_eq!(e.by_at.len(), 2);
        // The freed run in the middle is the best fit for two granules.
        assert_eq!(e.take(8000), Some((4096, 8192)));
        e.give(4096, 8192);
        e.give(a.0, a.1);
        e.give(c.0, c.1);
        assert_eq!(e.by_at.len(), 1, "all merged");
        assert_eq!(e.by_at.get(&0), Some(&(10 * 4096)));
        assert_eq!(e.take(11 * 4096), None);
    }

    #[test]
    fn a_tail_goes_back_in_whole_granules() {
        let mut e = Extents::new(4 * 4096, 4096);
        let (at, len) = e.take(4 * 4096).unwrap();
        assert_eq!((at, len), (0, 4 * 4096));
        e.give_tail(100, 4 * 4096 - 100);
        assert_eq!(e.by_at.get(&4096), Some(&(3 * 4096)));
    }

    #[test]
    fn bodies_live_in_the_file_and_come_back_when_dropped() {
        let dir = std::env::temp_dir().join(format!("lacquer-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = FileSpec {
            path: dir.clone(),
            size: Some(1 << 20),
            granularity: 4096,
            random: true,
        };
        let engine = FileEngine::open(&spec).unwrap();
        assert_eq!(engine.size(), 1 << 20);
        assert!(
            !engine.path().exists(),
            "the file in a directory is removed"
        );
        let obj = Arc::new(crate::tests::plain_object());
        let Placement::Room(mut room) = engine.allocate(10, 10, false, &obj, &mut Vec::new())
        else {
            panic!("room expected");
        };
        let view = room.write(b"0123456789").unwrap();
        engine.trim(room);
        assert_eq!(&view[..], b"0123456789");
        let mut c = Vec::new();
        engine.extra_counters(&mut c);
        assert_eq!(c, vec![2, 0, 1], "one room, one large free run");
        drop(view);
        c.clear();
        engine.extra_counters(&mut c);
        assert_eq!(c, vec![1, 0, 1]);
        let whole = engine.allocate(1 << 20, 1 << 20, false, &obj, &mut Vec::new());
        assert!(matches!(whole, Placement::Room(_)), "all merged back");
        let Placement::Full = engine.allocate(4096, 4096, false, &obj, &mut Vec::new()) else {
            panic!("the file is full");
        };
        drop(whole);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
