//! The frame guard: follows the frames a client sends by their 9-byte
//! headers as they are read, and tells the session to close with GOAWAY
//! ENHANCE_YOUR_CALM when a client resets streams too soon too often or
//! floods it with SETTINGS, PING, PRIORITY, empty DATA or CONTINUATION
//! frames.

use super::{ConnState, PREFACE};
use lacquer_core::close::CloseReason;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames of one kind a connection may send within [`FLOOD_PERIOD`].
const FLOOD_PERIOD: Duration = Duration::from_secs(10);
const MAX_SETTINGS: u32 = 32;
const MAX_PINGS: u32 = 64;
const MAX_PRIORITY: u32 = 1000;
const MAX_EMPTY_DATA: u32 = 256;
/// CONTINUATION frames one header block may take.
const MAX_CONTINUATIONS: u32 = 64;

/// Follows the frames a client sends, by their 9-byte headers, and
/// counts what a flood is made of.
pub(super) struct FrameGuard {
    pub(super) state: Arc<ConnState>,
    /// Preface bytes still to pass.
    preface_left: usize,
    header: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to pass.
    skip: usize,
    window_start: Instant,
    settings: u32,
    pings: u32,
    priority: u32,
    empty_data: u32,
    continuations: u32,
    /// When recent streams' HEADERS came, by stream id (bounded).
    opened: VecDeque<(u32, Instant)>,
    /// A whole frame header has passed.
    framed: bool,
}

impl FrameGuard {
    pub(super) fn new(state: Arc<ConnState>) -> FrameGuard {
        FrameGuard {
            state,
            preface_left: PREFACE.len(),
            header: [0; 9],
            have: 0,
            skip: 0,
            window_start: Instant::now(),
            settings: 0,
            pings: 0,
            priority: 0,
            empty_data: 0,
            continuations: 0,
            opened: VecDeque::new(),
            framed: false,
        }
    }

    /// Bytes still to pass before the client's first frame has ended
    /// (preface, header, payload), or None once it has.
    pub(super) fn first_frame_left(&self) -> Option<usize> {
        match (self.preface_left, self.framed) {
            (0, true) if self.skip == 0 => None,
            (0, true) => Some(self.skip),
            (0, false) => Some(9 - self.have),
            (left, _) => Some(left),
        }
    }

    pub(super) fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == 9 {
                self.have = 0;
                let h = self.header;
                let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                self.frame(h[3], h[4], len, id);
                self.skip = len;
                self.framed = true;
            }
        }
    }

    /// One frame header: type, flags, payload length, stream.
    fn frame(&mut self, kind: u8, flags: u8, len: usize, id: u32) {
        const ACK: u8 = 0x1;
        const END_STREAM: u8 = 0x1;
        const END_HEADERS: u8 = 0x4;
        if self.window_start.elapsed() > FLOOD_PERIOD {
            self.window_start = Instant::now();
            (self.settings, self.pings, self.priority, self.empty_data) = (0, 0, 0, 0);
        }
        let over = match kind {
            // DATA without payload that does not end its stream.
            0x0 if len == 0 && flags & END_STREAM == 0 => {
                self.empty_data += 1;
                self.empty_data > MAX_EMPTY_DATA
            }
            0x1 => {
                self.opened.push_back((id, Instant::now()));
                if self.opened.len() > 256 {
                    self.opened.pop_front();
                }
                self.continuations = 0;
                false
            }
            0x2 => {
                self.priority += 1;
                self.priority > MAX_PRIORITY
            }
            0x3 => {
                if let Some(i) = self.opened.iter().position(|(s, _)| *s == id) {
                    let (_, at) = self.opened.remove(i).unwrap_or((id, Instant::now()));
                    self.state.reset_after(at.elapsed());
                }
                false
            }
            0x4 if flags & ACK == 0 => {
                self.settings += 1;
                self.settings > MAX_SETTINGS
            }
            0x6 if flags & ACK == 0 => {
                self.pings += 1;
                self.pings > MAX_PINGS
            }
            0x9 => {
                self.continuations += 1;
                if flags & END_HEADERS != 0 {
                    self.continuations = 0;
                }
                self.continuations > MAX_CONTINUATIONS
            }
            _ => false,
        };
        if over {
            self.state.tell_calm(CloseReason::Calm);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn state() -> Arc<ConnState> {
        Arc::new(ConnState::new(
            Duration::from_secs(1),
            3,
            Duration::from_secs(60),
        ))
    }

    fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn floods_and_rapid_resets_ask_for_calm() {
        // Pings, fed a byte at a time after the preface.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        let mut bytes = PREFACE.to_vec();
        for _ in 0..MAX_PINGS {
            bytes.extend(frame(6, 0, 0, &[0; 8]));
            bytes.extend(frame(6, 1, 0, &[0; 8]));
        }
        for b in &bytes {
            g.scan(std::slice::from_ref(b));
        }
        assert!(!s.calm.load(Ordering::Acquire));
        g.scan(&frame(6, 0, 0, &[0; 8]));
        assert!(s.calm.load(Ordering::Acquire));

        // Streams opened and reset at once, past the limit of 3.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        for id in [1u32, 3, 5] {
            g.scan(&frame(1, 0x5, id, b"hpack"));
            g.scan(&frame(3, 0, id, &[0, 0, 0, 8]));
        }
        assert!(!s.calm.load(Ordering::Acquire));
        g.scan(&frame(1, 0x5, 7, b"hpack"));
        g.scan(&frame(3, 0, 7, &[0, 0, 0, 8]));
        assert!(s.calm.load(Ordering::Acquire));
        assert_eq!(
            *s.calm_reason.lock().unwrap(),
            Some(CloseReason::RapidReset)
        );

        // A header block in endless CONTINUATION frames.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        g.scan(&frame(1, 0, 1, b"h"));
        for _ in 0..=MAX_CONTINUATIONS {
            g.scan(&frame(9, 0, 1, b"c"));
        }
        assert!(s.calm.load(Ordering::Acquire));

        // Ordinary traffic does not.
        let s = state();
        let mut g = FrameGuard::new(s.clone());
        g.scan(PREFACE);
        g.scan(&frame(4, 0, 0, &[]));
        for id in (1u32..400).step_by(2) {
            g.scan(&frame(1, 0x4, id, b"hpack"));
            g.scan(&frame(0, 1, id, b"body"));
            g.scan(&frame(8, 0, 0, &[0, 0, 1, 0]));
        }
        assert!(!s.calm.load(Ordering::Acquire));
    }
}
