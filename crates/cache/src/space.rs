//! Where the file engines' bytes are: the storage file, written through
//! its descriptor (`pwrite`) and read through its mapping; the rooms an
//! engine sets aside in it, which a fill writes into in order; and the
//! views of what was written, which readers share without copying and
//! which hold their room until the last of them is dropped. Nothing here
//! knows what an object is: the engines (`file.rs`, `persist/`) decide
//! where rooms go, the store (`store.rs`) drives them.

use bytes::Bytes;
use lacquer_shm::mapped::FileMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A storage file: written through the descriptor, read through the
/// mapping.
#[derive(Debug)]
pub struct FileSpace {
    file: File,
    map: FileMap,
}

impl FileSpace {
    /// Maps `file`; with `random`, the kernel reads no more than asked
    /// (a hit wants its own pages, not its neighbours').
    pub fn new(file: File, random: bool) -> io::Result<Arc<FileSpace>> {
        let map = FileMap::new(&file)?;
        if random {
            map.advise_random();
        }
        Ok(Arc::new(FileSpace { file, map }))
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Writes `bytes` at `at`.
    pub fn write_at(&self, bytes: &[u8], at: u64) -> io::Result<()> {
        if at + bytes.len() as u64 > self.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "past the end"));
        }
        self.file.write_all_at(bytes, at)
    }

    /// The bytes at `at..at + len`, read through the mapping.
    pub fn bytes(&self, at: u64, len: u64) -> &[u8] {
        &self.map[at as usize..(at + len) as usize]
    }

    /// Says that `len` bytes at `at` are about to be read in order (or,
    /// with `in_order` false, no longer are): the kernel reads ahead.
    pub fn reading_in_order(&self, at: u64, len: u64, in_order: bool) {
        self.map.advise_range(at as usize, len as usize, in_order);
    }

    /// Asks the kernel to write what is dirty to the disk.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// What gives room back to its engine when the last view of it is
/// dropped.
pub trait Release: Send + Sync {
    /// The room at `at..at + len` is free (its views are all gone).
    fn release(&self, at: u64, len: u64);
}

/// Room an engine set aside in its file. The fill writes into it in
/// order; each write gives a view of what it wrote, and the room stays
/// set aside while any view lives.
pub struct Room {
    inner: Arc<RoomInner>,
    written: u64,
}

struct RoomInner {
    space: Arc<FileSpace>,
    at: u64,
    /// Its length (the unused tail is given back when the fill ends).
    len: AtomicU64,
    owner: Arc<dyn Release>,
}

impl Drop for RoomInner {
    fn drop(&mut self) {
        self.owner.release(self.at, *self.len.get_mut());
    }
}

impl Room {
    /// Room at `at..at + len` of `space`, given back to `owner`.
    pub fn new(space: Arc<FileSpace>, at: u64, len: u64, owner: Arc<dyn Release>) -> Room {
        Room {
            inner: Arc::new(RoomInner {
                space,
                at,
                len: AtomicU64::new(len),
                owner,
            }),
            written: 0,
        }
    }

    /// Where it starts in the file.
    pub fn at(&self) -> u64 {
        self.inner.at
    }

    /// Bytes written into it so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes still free in it.
    pub fn remaining(&self) -> u64 {
        self.inner.len.load(Ordering::Relaxed) - self.written
    }

    /// Writes bytes (no more than [`Room::remaining`]) after those
    /// already written, and returns the view of them readers share.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<Bytes> {
        let len = bytes.len() as u64;
        if len > self.remaining() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "room is full"));
        }
        let at = self.inner.at + self.written;
        self.inner.space.write_at(bytes, at)?;
        self.written += len;
        Ok(Bytes::from_owner(View {
            room: self.inner.clone(),
            at,
            len,
        }))
    }

    /// Keeps only what was written; the rest is the engine's again
    /// (`give_back` frees the tail).
    pub fn trim(self, give_back: impl FnOnce(u64, u64)) {
        let len = self.inner.len.load(Ordering::Relaxed);
        if self.written < len {
            self.inner.len.store(self.written, Ordering::Relaxed);
            give_back(self.inner.at + self.written, len - self.written);
        }
    }
}

/// Stored bytes as readers see them: a range of a room, in the mapping.
struct View {
    room: Arc<RoomInner>,
    at: u64,
    len: u64,
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        self.room.space.bytes(self.at, self.len)
    }
}

/// A view of bytes already in a file (a recovered head or body), holding
/// `pin` as long as it lives.
pub fn view_of<P: Send + Sync + 'static>(
    space: &Arc<FileSpace>,
    at: u64,
    len: u64,
    pin: P,
) -> Bytes {
    struct Pinned<P> {
        space: Arc<FileSpace>,
        at: u64,
        len: u64,
        _pin: P,
    }
    impl<P> AsRef<[u8]> for Pinned<P> {
        fn as_ref(&self) -> &[u8] {
            self.space.bytes(self.at, self.len)
        }
    }
    Bytes::from_owner(Pinned {
        space: space.clone(),
        at,
        len,
        _pin: pin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Freed(Mutex<Vec<(u64, u64)>>);

    impl Release for Freed {
        fn release(&self, at: u64, len: u64) {
            self.0.lock().unwrap().push((at, len));
        }
    }

    pub(crate) fn temp_file(name: &str, len: u64) -> (std::path::PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("lacquer-engine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(len).unwrap();
        (path, file)
    }

    #[test]
    fn a_room_is_given_back_with_its_last_view() {
        let (path, file) = temp_file("room", 8192);
        let space = FileSpace::new(file, true).unwrap();
        let freed = Arc::new(Freed::default());
        let mut room = Room::new(space.clone(), 4096, 100, freed.clone());
        let a = room.write(b"hello ").unwrap();
        let b = room.write(b"world").unwrap();
        assert!(room.write(&[0; 90]).is_err(), "past the room");
        assert_eq!(room.remaining(), 89);
        let mut tail = None;
        room.trim(|at, len| tail = Some((at, len)));
        assert_eq!(tail, Some((4096 + 11, 89)));
        assert_eq!([&a[..], &b[..]].concat(), b"hello world");
        drop(a);
        assert!(freed.0.lock().unwrap().is_empty(), "a view still holds it");
        drop(b);
        assert_eq!(*freed.0.lock().unwrap(), vec![(4096, 11)]);
        let _ = std::fs::remove_file(path);
    }
}
