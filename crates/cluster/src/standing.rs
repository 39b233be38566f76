//! Where a node stands with invalidations, told in every datagram it
//! sends (before foca's message, inside the seal): its journal's run and
//! position (how many invalidations it made), and its lag (how many made
//! by the nodes it sees that it has not applied). Every node so knows
//! every other's position and lag within a probe period, which is what
//! `cluster.list` and the dashboard show from any node.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

/// One node's standing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// The run its journal's ids carry (`name.run.seq`).
    pub run: u64,
    /// How many invalidations it made in that run.
    pub position: u64,
    /// How many invalidations made elsewhere it knows it lacks.
    pub lag: u64,
}

/// A standing's length on the wire.
pub const LEN: usize = 24;

impl Standing {
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        out[..8].copy_from_slice(&self.run.to_be_bytes());
        out[8..16].copy_from_slice(&self.position.to_be_bytes());
        out[16..].copy_from_slice(&self.lag.to_be_bytes());
        out
    }

    /// The standing a message starts with, and the rest of it.
    pub fn decode(message: &[u8]) -> Option<(Standing, &[u8])> {
        let (head, rest) = message.split_at_checked(LEN)?;
        let word = |i: usize| u64::from_be_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        Some((
            Standing {
                run: word(0),
                position: word(8),
                lag: word(16),
            },
            rest,
        ))
    }
}

/// What this node says of itself, and what it last heard of each other
/// node (by the address it speaks from).
#[derive(Default)]
pub struct Standings {
    own: Mutex<Standing>,
    heard: Mutex<HashMap<SocketAddr, Standing>>,
}

impl Standings {
    pub fn own(&self) -> Standing {
        *self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets what this node says of itself from now on.
    pub fn set_own(&self, s: Standing) {
        *self.own.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    pub(crate) fn heard(&self, from: SocketAddr, s: Standing) {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(from, s);
    }

    /// What the node at `addr` last said of itself.
    pub fn of(&self, addr: SocketAddr) -> Option<Standing> {
        self.heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standing_reads_back_and_a_short_one_does_not() {
        let s = Standing {
            run: 1_700_000_000_000,
            position: 42,
            lag: 3,
        };
        let mut message = s.encode().to_vec();
        message.extend_from_slice(b"foca");
        assert_eq!(Standing::decode(&message), Some((s, &b"foca"[..])));
        for cut in 0..LEN {
            assert_eq!(Standing::decode(&message[..cut]), None);
        }
    }
}
