//! Byte buffers a thread keeps for its next connections and
//! transactions: a connection's write buffer and hash key, a session's
//! room for its last log records. Each is made once per connection, and
//! with one request a connection (or a client that opens one for every
//! request) making and freeing them was a few allocations a request;
//! kept here they are taken back from the thread's own list.
//!
//! Buffers are kept by size class (a power of two, from 128 bytes to
//! 64 KiB): a class holds at most [`PER_CLASS`] buffers, each of at least
//! its class's capacity, so a thread keeps at most about 1 MiB here. A
//! buffer that grew past 64 KiB (a huge response head) is let go.

use std::cell::RefCell;

/// The smallest class: 2^7 bytes.
const MIN_SHIFT: u32 = 7;
/// The largest class: 2^16 bytes.
const MAX_SHIFT: u32 = 16;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// Buffers kept per class and thread.
pub const PER_CLASS: usize = 8;

thread_local! {
    static SPARE: RefCell<[Vec<Vec<u8>>; CLASSES]> = const {
        RefCell::new([const { Vec::new() }; CLASSES])
    };
}

/// The class whose buffers all hold at least `n` bytes.
fn class_for(n: usize) -> usize {
    let shift = n.max(1).next_power_of_two().trailing_zeros();
    shift.clamp(MIN_SHIFT, MAX_SHIFT) as usize - MIN_SHIFT as usize
}

/// An empty buffer of at least `capacity` bytes (at most 64 KiB are
/// looked for), kept from an earlier user on this thread when there is
/// one.
pub fn take(capacity: usize) -> Vec<u8> {
    if capacity <= 1 << MAX_SHIFT {
        let class = class_for(capacity);
        let kept = SPARE
            .try_with(|spare| spare.borrow_mut()[class].pop())
            .ok()
            .flatten();
        if let Some(buf) = kept {
            return buf;
        }
        return Vec::with_capacity(1 << (class + MIN_SHIFT as usize));
    }
    Vec::with_capacity(capacity)
}

/// Keeps a buffer, emptied, for the thread's next [`take`]; one smaller
/// than the smallest class, past the largest, or beyond what its class
/// keeps is let go.
pub fn keep(mut buf: Vec<u8>) {
    let cap = buf.capacity();
    if !(1 << MIN_SHIFT..=1 << MAX_SHIFT).contains(&cap) {
        return;
    }
    // The largest class all of whose buffers it can stand for.
    let class = (usize::BITS - 1 - cap.leading_zeros()).clamp(MIN_SHIFT, MAX_SHIFT) as usize
        - MIN_SHIFT as usize;
    buf.clear();
    let _ = SPARE.try_with(|spare| {
        let list = &mut spare.borrow_mut()[class];
        if list.len() < PER_CLASS {
            list.push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_serves_the_next_take_of_its_class_on_its_thread() {
        let mut buf = take(1000);
        assert!(buf.capacity() >= 1024);
        buf.extend_from_slice(b"old bytes");
        let at = buf.as_ptr();
        keep(buf);
        let again = take(600);
        assert_eq!(
            again.as_ptr(),
            at,
            "the kept buffer, of a class that holds 600"
        );
        assert!(again.is_empty(), "emptied");
        keep(again);
        // A larger need takes a larger class: not this buffer.
        assert!(take(2000).capacity() >= 2000);
        // Another thread has its own.
        let at_here = at as usize;
        std::thread::spawn(move || {
            let theirs = take(1000);
            assert_ne!(theirs.as_ptr() as usize, at_here);
        })
        .join()
        .unwrap();
        let kept = take(1024);
        assert_eq!(kept.as_ptr(), at);
    }

    #[test]
    fn classes_are_bounded_and_odd_sizes_are_let_go_or_kept_below() {
        // A buffer of 300 bytes stands for the 256 class, never the 512.
        let odd = Vec::<u8>::with_capacity(300);
        let at = odd.as_ptr();
        keep(odd);
        let larger = take(512);
        assert_ne!(larger.as_ptr(), at);
        let kept = take(256);
        assert_eq!(kept.as_ptr(), at);
        // Too small, too large: let go.
        keep(Vec::with_capacity(64));
        keep(Vec::with_capacity(1 << 20));
        assert!(take(64).capacity() >= 128);
        // At most PER_CLASS a class.
        let many: Vec<Vec<u8>> = (0..PER_CLASS + 3).map(|_| take(4096)).collect();
        many.into_iter().for_each(keep);
        let kept = SPARE.with(|s| s.borrow()[class_for(4096)].len());
        assert_eq!(kept, PER_CLASS);
        // A need past the largest class is made as asked.
        assert!(take(100_000).capacity() >= 100_000);
    }
}
