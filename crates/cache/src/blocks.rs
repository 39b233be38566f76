//! A vector in fixed blocks that never move: it grows a block at a time
//! instead of doubling (a doubling vector holds up to twice what it needs,
//! and copies everything as it grows), and gives a block back once it is
//! empty. The eviction lists' nodes live in one, and each expiry queue's
//! times and entries in one each: a few more bytes an object than their
//! entries, whatever the count.

/// Entries a block holds.
pub(crate) const BLOCK: usize = 4096;

#[derive(Debug)]
pub(crate) struct Blocks<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Self {
        Blocks {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Blocks<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn push(&mut self, value: T) {
        if self.len.is_multiple_of(BLOCK) {
            self.blocks.push(Vec::with_capacity(BLOCK));
        }
        self.blocks.last_mut().expect("a block").push(value);
        self.len += 1;
    }

    /// Takes the last entry off, giving its block back when it empties.
    pub fn pop(&mut self) -> Option<T> {
        let block = self.blocks.last_mut()?;
        let value = block.pop()?;
        if block.is_empty() {
            self.blocks.pop();
        }
        self.len -= 1;
        Some(value)
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.blocks.get(i / BLOCK)?.get(i % BLOCK)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.blocks.get_mut(i / BLOCK)?.get_mut(i % BLOCK)
    }

    /// Swaps two entries (both below `len`).
    pub fn swap(&mut self, a: usize, b: usize) {
        let (ba, bb) = (a / BLOCK, b / BLOCK);
        if ba == bb {
            self.blocks[ba].swap(a % BLOCK, b % BLOCK);
            return;
        }
        let (lo, hi) = (ba.min(bb), ba.max(bb));
        let (left, right) = self.blocks.split_at_mut(hi);
        let (x, y) = (&mut left[lo], &mut right[0]);
        let (xi, yi) = if ba < bb {
            (a % BLOCK, b % BLOCK)
        } else {
            (b % BLOCK, a % BLOCK)
        };
        std::mem::swap(&mut x[xi], &mut y[yi]);
    }

    /// Blocks held (for tests).
    #[cfg(test)]
    pub fn blocks(&self) -> &[Vec<T>] {
        &self.blocks
    }
}

impl<T> std::ops::Index<usize> for Blocks<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.blocks[i / BLOCK][i % BLOCK]
    }
}

impl<T> std::ops::IndexMut<usize> for Blocks<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.blocks[i / BLOCK][i % BLOCK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_places_across_blocks_and_empty_blocks_go() {
        let mut b = Blocks::default();
        for i in 0..BLOCK * 2 + 3 {
            b.push(i);
        }
        assert_eq!(b.len(), BLOCK * 2 + 3);
        assert_eq!(b.blocks().len(), 3);
        assert!(b.blocks().iter().all(|x| x.capacity() == BLOCK));
        assert_eq!(
            (b[0], b[BLOCK], b[BLOCK * 2 + 2]),
            (0, BLOCK, BLOCK * 2 + 2)
        );
        // Within a block, and across blocks either way round.
        b.swap(1, 2);
        b.swap(3, BLOCK + 7);
        b.swap(BLOCK * 2 + 1, 5);
        assert_eq!((b[1], b[2]), (2, 1));
        assert_eq!((b[3], b[BLOCK + 7]), (BLOCK + 7, 3));
        assert_eq!((b[5], b[BLOCK * 2 + 1]), (BLOCK * 2 + 1, 5));
        *b.get_mut(0).unwrap() = 99;
        assert_eq!(b.get(0), Some(&99));
        assert_eq!(b.get(BLOCK * 2 + 3), None);
        for _ in 0..3 {
            b.pop();
        }
        assert_eq!(b.blocks().len(), 2, "the emptied block went");
        while b.pop().is_some() {}
        assert_eq!((b.len(), b.blocks().len()), (0, 0));
    }
}
