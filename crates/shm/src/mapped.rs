//! A storage file mapped for reading: the bytes the `file` and
//! `persistent` stores hand out as views. Writes go through the file
//! (`pwrite`), never through the mapping, so a full or failing disk is an
//! error the writer sees, not a signal; the mapping only lets readers
//! share the page cache without copying.
//!
//! The one promise the mapping needs, and the stores keep: a range of the
//! file is never rewritten while a view of it lives (a store reuses room
//! only once the last view of it is dropped). The file is the daemon's
//! own; one truncated by someone else is outside what any mapping
//! survives.

use std::fs::File;
use std::io;
use std::ops::Deref;

/// A whole file mapped read-only and shared.
#[derive(Debug)]
pub struct FileMap {
    map: memmap2::Mmap,
}

impl FileMap {
    /// Maps `file` as it is now (its length is fixed for the mapping's
    /// life).
    pub fn new(file: &File) -> io::Result<FileMap> {
        // SAFETY: the store that owns the file writes a range only while
        // no view of it exists (see the module's documentation), and
        // nothing else writes the file.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        Ok(FileMap { map })
    }

    /// Tells the kernel the mapping is read in no particular order, so
    /// a hit does not read ahead what nobody asked for.
    pub fn advise_random(&self) {
        let _ = self.map.advise(memmap2::Advice::Random);
    }

    /// Tells the kernel how `len` bytes at `at` are about to be read: in
    /// order (read ahead, as a restart walking a store does), or, with
    /// `in_order` false, in no particular order again.
    pub fn advise_range(&self, at: usize, len: usize, in_order: bool) {
        let advice = if in_order {
            memmap2::Advice::Sequential
        } else {
            memmap2::Advice::Random
        };
        let _ = self.map.advise_range(advice, at, len);
    }
}

/// Sets aside the disk blocks of `file`'s first `len` bytes, so that
/// writing them later cannot fail for want of space (a sparse file on a
/// full disk would). Filesystems that cannot do it are left sparse.
pub fn preallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too large"))?;
    // SAFETY: a plain system call on a descriptor the caller owns.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len as u64),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

impl Deref for FileMap {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn writes_through_the_file_show_in_the_mapping() {
        let dir = std::env::temp_dir().join(format!("lacquer-map-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(8192).unwrap();
        let map = FileMap::new(&file).unwrap();
        file.write_all_at(b"hello", 4096).unwrap();
        assert_eq!(&map[4096..4101], b"hello");
        assert_eq!(map.len(), 8192);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
