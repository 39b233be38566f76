//! Short fixed texts (method and action names, and the like) kept padded
//! to a known size, so that appending one to a buffer is a copy of
//! constant length (a couple of register moves) rather than a call to
//! `memcpy` for a few bytes: a request's log writes a dozen of them.

/// The most bytes a word holds.
pub const WORD_MAX: usize = 16;

/// A text of at most [`WORD_MAX`] bytes with its padded copy.
#[derive(Debug, Clone, Copy)]
pub struct Word {
    text: &'static str,
    padded: [u8; WORD_MAX],
}

impl Word {
    /// The word for `text`, which must be at most [`WORD_MAX`] bytes: a
    /// longer one is a compile-time error in a `const`, a panic otherwise.
    pub const fn new(text: &'static str) -> Word {
        assert!(text.len() <= WORD_MAX, "a word is at most 16 bytes");
        let bytes = text.as_bytes();
        let mut padded = [0u8; WORD_MAX];
        let mut i = 0;
        while i < bytes.len() {
            padded[i] = bytes[i];
            i += 1;
        }
        Word { text, padded }
    }

    pub fn as_str(&self) -> &'static str {
        self.text
    }

    /// The text padded with zero bytes to [`WORD_MAX`].
    #[inline]
    pub fn padded(&self) -> &[u8; WORD_MAX] {
        &self.padded
    }

    /// Appends the text.
    #[inline]
    pub fn push(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&self.padded);
        out.truncate(at + self.text.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_appends_exactly_its_text() {
        const EMPTY: Word = Word::new("");
        const FULL: Word = Word::new("BACKEND_RESPONSE");
        for (w, text) in [
            (EMPTY, ""),
            (Word::new("RECV"), "RECV"),
            (FULL, "BACKEND_RESPONSE"),
        ] {
            let mut out = b"x".to_vec();
            w.push(&mut out);
            w.push(&mut out);
            assert_eq!(out, format!("x{text}{text}").into_bytes());
            assert_eq!(w.as_str(), text);
        }
    }

    #[test]
    #[should_panic(expected = "at most 16 bytes")]
    fn a_longer_text_is_refused() {
        let _ = Word::new("seventeen bytes!!");
    }
}
