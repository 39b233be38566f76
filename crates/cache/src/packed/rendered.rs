//! The field lines a thread last wrote from packed heads, each kept with
//! the packed bytes it was written from. A hit on a popular object writes
//! the same lines again and again: written from the packed head, each
//! field costs a name from the table, a shared value or a date made text,
//! and three appends; copied, the whole block is one. What a packed head
//! says depends on its bytes alone (names come from a fixed table, shared
//! values keep their numbers for the process's life, dates are seconds),
//! so a kept block is used only for the very same bytes, compared in full:
//! which object the bytes belong to does not matter.

use std::cell::RefCell;

/// Blocks a thread keeps, one per slot; the slot is picked from where the
/// packed bytes lie, a hint the comparison makes safe.
const SLOTS: usize = 8;
/// Packed fields longer than this are written every time.
const MAX_PACKED: usize = 1024;
/// Nor are blocks longer than this kept.
const MAX_TEXT: usize = 4096;

#[derive(Default)]
struct Slot {
    packed: Vec<u8>,
    text: Vec<u8>,
}

thread_local! {
    static KEPT: RefCell<[Slot; SLOTS]> = RefCell::new(Default::default());
}

/// Appends the field lines of the packed fields `packed` to `out`: the
/// block kept for the same bytes when there is one, else what `write`
/// writes, which is then kept.
#[inline]
pub(super) fn write_fields(packed: &[u8], out: &mut Vec<u8>, write: impl Fn(&[u8], &mut Vec<u8>)) {
    if packed.len() > MAX_PACKED {
        return write(packed, out);
    }
    let slot = (packed.as_ptr() as usize >> 4) % SLOTS;
    let kept = KEPT.try_with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else {
            return false;
        };
        let kept = &mut kept[slot];
        if kept.packed == packed {
            out.extend_from_slice(&kept.text);
            return true;
        }
        let at = out.len();
        write(packed, out);
        let text = &out[at..];
        kept.packed.clear();
        kept.text.clear();
        if text.len() <= MAX_TEXT {
            kept.packed.extend_from_slice(packed);
            kept.text.extend_from_slice(text);
        }
        true
    });
    if kept != Ok(true) {
        write(packed, out);
    }
}
