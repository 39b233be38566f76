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
    /// Where each line of `text` ends (past its LF), once a caller asked
    /// ([`write_fields_then`]): a plain write looks for no line.
    ends: Option<Vec<u32>>,
}

thread_local! {
    static KEPT: RefCell<[Slot; SLOTS]> = RefCell::new(Default::default());
}

/// The slot for packed bytes: a hint from where they lie.
#[inline]
fn slot_of(packed: &[u8]) -> usize {
    (packed.as_ptr() as usize >> 4) % SLOTS
}

/// Appends the field lines of the packed fields `packed` to `out`: the
/// block kept for the same bytes when there is one, else what `write`
/// writes, which is then kept.
#[inline]
pub(super) fn write_fields(packed: &[u8], out: &mut Vec<u8>, write: impl Fn(&[u8], &mut Vec<u8>)) {
    if packed.len() > MAX_PACKED {
        return write(packed, out);
    }
    let kept = KEPT.try_with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else {
            return false;
        };
        let slot = &mut kept[slot_of(packed)];
        if slot.packed == packed {
            out.extend_from_slice(&slot.text);
        } else {
            refill(slot, packed, out, &write);
        }
        true
    });
    if kept != Ok(true) {
        write(packed, out);
    }
}

/// Appends the field lines as [`write_fields`] does, then calls `then`
/// with `out`, where the lines start in it, and where each ends (past
/// its LF) counted from there: for a kept block they are looked for
/// once, and kept with it, so that the next response that edits a few
/// lines of the same head need not look for them.
pub(super) fn write_fields_then<R>(
    packed: &[u8],
    out: &mut Vec<u8>,
    write: impl Fn(&[u8], &mut Vec<u8>),
    then: impl FnOnce(&mut Vec<u8>, usize, &[u32]) -> R,
) -> R {
    let start = out.len();
    let mut then = Some(then);
    if packed.len() <= MAX_PACKED {
        let done = KEPT.try_with(|kept| {
            let mut kept = kept.try_borrow_mut().ok()?;
            let slot = &mut kept[slot_of(packed)];
            if slot.packed == packed {
                out.extend_from_slice(&slot.text);
            } else if !refill(slot, packed, out, &write) {
                return None;
            }
            let ends = slot.ends.get_or_insert_with(|| line_ends(&slot.text));
            then.take().map(|then| then(out, start, ends))
        });
        if let Ok(Some(done)) = done {
            return done;
        }
    }
    // Not kept. Nothing was written either when no block could be
    // looked at, or when the fields are none (written again: nothing).
    if out.len() == start {
        write(packed, out);
    }
    let ends = line_ends(&out[start..]);
    match then.take() {
        Some(then) => then(out, start, &ends),
        None => unreachable!("`then` is taken only when it returns"),
    }
}

/// Writes the block for `packed` and keeps it in `slot` in place of
/// the one there; whether it was kept (a block too long to keep is
/// written, not kept).
fn refill(
    slot: &mut Slot,
    packed: &[u8],
    out: &mut Vec<u8>,
    write: impl Fn(&[u8], &mut Vec<u8>),
) -> bool {
    let at = out.len();
    write(packed, out);
    let text = &out[at..];
    slot.packed.clear();
    slot.text.clear();
    slot.ends = None;
    if text.len() > MAX_TEXT {
        return false;
    }
    slot.packed.extend_from_slice(packed);
    slot.text.extend_from_slice(text);
    true
}

/// Where each line of `text` ends, past its LF.
pub(super) fn line_ends(text: &[u8]) -> Vec<u32> {
    memchr::memchr_iter(b'\n', text)
        .map(|i| (i + 1) as u32)
        .collect()
}
