//! How foca's messages are written on the wire: by hand, a byte for each
//! kind of message and fixed-width numbers, so that no serialization
//! framework is needed and every read is bounded by what was received.
//! A message that does not read whole is refused, never guessed at.

use crate::node::{get_node, need, node_len, put_node, Malformed, Node};
use bytes::{Buf, BufMut};
use foca::{Header, Member, Message, State};

/// foca's codec for [`Node`] identities.
#[derive(Debug, Default, Clone, Copy)]
pub struct Wire;

/// Out of room in the buffer foca hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecError {
    NoRoom,
    Malformed,
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecError::NoRoom => f.write_str("no room for the message"),
            CodecError::Malformed => f.write_str("malformed cluster message"),
        }
    }
}

impl std::error::Error for CodecError {}

impl From<Malformed> for CodecError {
    fn from(_: Malformed) -> Self {
        CodecError::Malformed
    }
}

/// The message kinds, as their first byte.
const PING: u8 = 1;
const ACK: u8 = 2;
const PING_REQ: u8 = 3;
const INDIRECT_PING: u8 = 4;
const INDIRECT_ACK: u8 = 5;
const FORWARDED_ACK: u8 = 6;
const ANNOUNCE: u8 = 7;
const FEED: u8 = 8;
const GOSSIP: u8 = 9;
const BROADCAST: u8 = 10;
const TURN_UNDEAD: u8 = 11;

/// A message's kind, the node it names (if any) and its probe number.
fn parts(message: &Message<Node>) -> (u8, Option<&Node>, u8) {
    match message {
        Message::Ping(n) => (PING, None, *n),
        Message::Ack(n) => (ACK, None, *n),
        Message::PingReq {
            target,
            probe_number,
        } => (PING_REQ, Some(target), *probe_number),
        Message::IndirectPing {
            origin,
            probe_number,
        } => (INDIRECT_PING, Some(origin), *probe_number),
        Message::IndirectAck {
            target,
            probe_number,
        } => (INDIRECT_ACK, Some(target), *probe_number),
        Message::ForwardedAck {
            origin,
            probe_number,
        } => (FORWARDED_ACK, Some(origin), *probe_number),
        Message::Announce => (ANNOUNCE, None, 0),
        Message::Feed => (FEED, None, 0),
        Message::Gossip => (GOSSIP, None, 0),
        Message::Broadcast => (BROADCAST, None, 0),
        Message::TurnUndead => (TURN_UNDEAD, None, 0),
    }
}

fn state_byte(state: State) -> u8 {
    match state {
        State::Alive => 0,
        State::Suspect => 1,
        State::Down => 2,
    }
}

impl foca::Codec<Node> for Wire {
    type Error = CodecError;

    fn encode_header(
        &mut self,
        header: &Header<Node>,
        mut buf: impl BufMut,
    ) -> Result<(), CodecError> {
        let (kind, named, probe) = parts(&header.message);
        let len =
            node_len(&header.src) + 2 + node_len(&header.dst) + 1 + named.map_or(0, node_len) + 1;
        if buf.remaining_mut() < len {
            return Err(CodecError::NoRoom);
        }
        put_node(&header.src, &mut buf);
        buf.put_u16(header.src_incarnation);
        put_node(&header.dst, &mut buf);
        buf.put_u8(kind);
        if let Some(node) = named {
            put_node(node, &mut buf);
        }
        buf.put_u8(probe);
        Ok(())
    }

    fn decode_header(&mut self, mut buf: impl Buf) -> Result<Header<Node>, CodecError> {
        let src = get_node(&mut buf)?;
        need(&buf, 2)?;
        let src_incarnation = buf.get_u16();
        let dst = get_node(&mut buf)?;
        need(&buf, 1)?;
        let kind = buf.get_u8();
        let named = match kind {
            PING_REQ | INDIRECT_PING | INDIRECT_ACK | FORWARDED_ACK => Some(get_node(&mut buf)?),
            _ => None,
        };
        need(&buf, 1)?;
        let probe_number = buf.get_u8();
        let message = match (kind, named) {
            (PING, None) => Message::Ping(probe_number),
            (ACK, None) => Message::Ack(probe_number),
            (PING_REQ, Some(target)) => Message::PingReq {
                target,
                probe_number,
            },
            (INDIRECT_PING, Some(origin)) => Message::IndirectPing {
                origin,
                probe_number,
            },
            (INDIRECT_ACK, Some(target)) => Message::IndirectAck {
                target,
                probe_number,
            },
            (FORWARDED_ACK, Some(origin)) => Message::ForwardedAck {
                origin,
                probe_number,
            },
            (ANNOUNCE, None) => Message::Announce,
            (FEED, None) => Message::Feed,
            (GOSSIP, None) => Message::Gossip,
            (BROADCAST, None) => Message::Broadcast,
            (TURN_UNDEAD, None) => Message::TurnUndead,
            _ => return Err(CodecError::Malformed),
        };
        Ok(Header {
            src,
            src_incarnation,
            dst,
            message,
        })
    }

    fn encode_member(
        &mut self,
        member: &Member<Node>,
        mut buf: impl BufMut,
    ) -> Result<(), CodecError> {
        if buf.remaining_mut() < node_len(member.id()) + 2 + 1 {
            return Err(CodecError::NoRoom);
        }
        put_node(member.id(), &mut buf);
        buf.put_u16(member.incarnation());
        buf.put_u8(state_byte(member.state()));
        Ok(())
    }

    fn decode_member(&mut self, mut buf: impl Buf) -> Result<Member<Node>, CodecError> {
        let id = get_node(&mut buf)?;
        need(&buf, 3)?;
        let incarnation = buf.get_u16();
        let state = match buf.get_u8() {
            0 => State::Alive,
            1 => State::Suspect,
            2 => State::Down,
            _ => return Err(CodecError::Malformed),
        };
        Ok(Member::new(id, incarnation, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foca::Codec;
    use std::sync::Arc;

    fn node(name: &str, port: u16) -> Node {
        Node {
            name: Arc::from(name),
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            http: format!("127.0.0.1:{}", port + 1).parse().unwrap(),
            run: 7,
        }
    }

    #[test]
    fn every_message_reads_back_as_written() {
        let t = node("c", 30);
        let messages = [
            Message::Ping(1),
            Message::Ack(2),
            Message::PingReq {
                target: t.clone(),
                probe_number: 3,
            },
            Message::IndirectPing {
                origin: t.clone(),
                probe_number: 4,
            },
            Message::IndirectAck {
                target: t.clone(),
                probe_number: 5,
            },
            Message::ForwardedAck {
                origin: t.clone(),
                probe_number: 6,
            },
            Message::Announce,
            Message::Feed,
            Message::Gossip,
            Message::Broadcast,
            Message::TurnUndead,
        ];
        for message in messages {
            let header = Header {
                src: node("a", 10),
                src_incarnation: 9,
                dst: node("b", 20),
                message,
            };
            let mut out = Vec::new();
            Wire.encode_header(&header, &mut out).unwrap();
            assert_eq!(Wire.decode_header(&out[..]).unwrap(), header);
            // Cut anywhere, it is refused.
            for cut in 0..out.len() {
                assert!(Wire.decode_header(&out[..cut]).is_err());
            }
        }
    }

    #[test]
    fn members_read_back_and_a_full_buffer_stays_clean() {
        for state in [State::Alive, State::Suspect, State::Down] {
            let m = Member::new(node("a", 10), 3, state);
            let mut out = Vec::new();
            Wire.encode_member(&m, &mut out).unwrap();
            let back = Wire.decode_member(&out[..]).unwrap();
            assert_eq!(
                (back.id(), back.incarnation(), back.state()),
                (m.id(), 3, state)
            );
        }
        let mut small = [0u8; 8];
        let m = Member::new(node("a", 10), 3, State::Alive);
        assert_eq!(
            Wire.encode_member(&m, &mut small[..]),
            Err(CodecError::NoRoom)
        );
        assert_eq!(small, [0; 8]);
        let mut bad = Vec::new();
        Wire.encode_member(&m, &mut bad).unwrap();
        *bad.last_mut().unwrap() = 9;
        assert!(Wire.decode_member(&bad[..]).is_err());
    }
}
