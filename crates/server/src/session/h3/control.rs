//! An HTTP/3 connection's unidirectional streams (RFC 9114 §6.2): the
//! server's control stream and its SETTINGS (a QPACK table of capacity
//! 0, the header list's limit), and the client's: its control stream,
//! whose first frame must be SETTINGS and which must stay open, and its
//! QPACK encoder and decoder streams, which with no dynamic table may
//! carry almost nothing (RFC 9204 §4.2). A push stream from a client, a
//! second stream of a critical type, or a frame that has no place on
//! the control stream closes the connection with the error HTTP/3 names
//! for it; a stream of an unknown type is refused (§6.2.3).

use crate::transport::h3::frames::{self, code, Frame, FrameError, FrameReader};
use crate::transport::h3::{close_for, varint_code};
use bytes::BytesMut;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The unidirectional stream types (§6.2, RFC 9204 §4.2).
const CONTROL: u64 = 0x00;
const PUSH: u64 = 0x01;
const QPACK_ENCODER: u64 = 0x02;
const QPACK_DECODER: u64 = 0x03;

/// SETTINGS identifiers (§7.2.4.1, RFC 9204 §5).
const MAX_FIELD_SECTION_SIZE: u64 = 0x06;

/// The most bytes a control stream's frame may have (SETTINGS, GOAWAY,
/// MAX_PUSH_ID …; unknown ones are skipped unread).
const CONTROL_FRAME_LIMIT: u64 = 16 * 1024;

/// Opens the server's control stream and sends its SETTINGS; the stream
/// must stay open as long as the connection (dropping it would end it).
pub(super) async fn open(
    conn: &quinn::Connection,
    header_list: u64,
) -> Result<quinn::SendStream, quinn::ConnectionError> {
    let mut send = conn.open_uni().await?;
    let mut settings = BytesMut::new();
    frames::put_varint(&mut settings, MAX_FIELD_SECTION_SIZE);
    frames::put_varint(&mut settings, header_list);
    let mut out = BytesMut::new();
    frames::put_varint(&mut out, CONTROL);
    frames::put_varint(&mut out, frames::SETTINGS);
    frames::put_varint(&mut out, settings.len() as u64);
    out.extend_from_slice(&settings);
    // (QPACK_MAX_TABLE_CAPACITY and QPACK_BLOCKED_STREAMS stay at their
    // default, 0: no dynamic table.)
    let _ = send.write_all(&out).await;
    Ok(send)
}

/// Takes the client's unidirectional streams for as long as the
/// connection lives.
pub(super) async fn accept(conn: quinn::Connection) {
    let seen = Arc::new(AtomicU8::new(0));
    while let Ok(recv) = conn.accept_uni().await {
        tokio::spawn(stream(conn.clone(), recv, seen.clone()));
    }
}

/// One unidirectional stream, by its type.
async fn stream(conn: quinn::Connection, mut recv: quinn::RecvStream, seen: Arc<AtomicU8>) {
    let mut head = [0u8; 8];
    let mut got = 0;
    let kind = loop {
        if let Some((kind, size)) = frames::varint(&head[..got]) {
            break Some((kind, size));
        }
        match recv.read(&mut head[got..got + 1]).await {
            Ok(Some(1)) => got += 1,
            _ => break None,
        }
    };
    let Some((kind, _)) = kind else {
        return;
    };
    let critical = |bit: u8| seen.fetch_or(bit, Ordering::Relaxed) & bit != 0;
    match kind {
        CONTROL if critical(1) => close(
            &conn,
            code::STREAM_CREATION_ERROR,
            "a second control stream",
        ),
        CONTROL => control(&conn, FrameReader::new(recv, CONTROL_FRAME_LIMIT)).await,
        PUSH => close(
            &conn,
            code::STREAM_CREATION_ERROR,
            "a push stream from a client",
        ),
        QPACK_ENCODER if critical(2) => close(
            &conn,
            code::STREAM_CREATION_ERROR,
            "a second QPACK encoder stream",
        ),
        QPACK_DECODER if critical(4) => close(
            &conn,
            code::STREAM_CREATION_ERROR,
            "a second QPACK decoder stream",
        ),
        QPACK_ENCODER => qpack_stream(&conn, recv, true).await,
        QPACK_DECODER => qpack_stream(&conn, recv, false).await,
        _ => {
            let _ = recv.stop(varint_code(code::STREAM_CREATION_ERROR));
        }
    }
}

fn close(conn: &quinn::Connection, code: u64, why: &str) {
    conn.close(varint_code(code), why.as_bytes());
}

/// The client's control stream.
async fn control(conn: &quinn::Connection, mut frames: FrameReader) {
    let mut first = true;
    loop {
        let frame = match frames.next().await {
            Ok(frame) => frame,
            Err(FrameError::Stream) => {
                return close(conn, code::CLOSED_CRITICAL_STREAM, "control stream reset")
            }
            Err(e) => return close_for(conn, &e),
        };
        match frame {
            Frame::End => return close(conn, code::CLOSED_CRITICAL_STREAM, "control stream ended"),
            Frame::Whole(frames::SETTINGS, payload) if first => {
                if let Err(why) = settings(&payload) {
                    return close(conn, code::SETTINGS_ERROR, why);
                }
            }
            _ if first => return close(conn, code::MISSING_SETTINGS, "no SETTINGS first"),
            // A client's GOAWAY names the last push it will take: this
            // server pushes nothing. MAX_PUSH_ID and CANCEL_PUSH likewise.
            Frame::Whole(frames::GOAWAY | 0x03 | 0x0d, _) => {}
            Frame::Whole(..) | Frame::Data(_) => {
                return close(conn, code::FRAME_UNEXPECTED, "on the control stream")
            }
        }
        first = false;
    }
}

/// Reads a SETTINGS frame's payload: pairs of identifiers and values,
/// none twice, none of HTTP/2's (§7.2.4.1).
fn settings(mut payload: &[u8]) -> Result<(), &'static str> {
    let mut ids = Vec::new();
    while !payload.is_empty() {
        let (id, a) = frames::varint(payload).ok_or("a cut setting")?;
        let (_, b) = frames::varint(&payload[a..]).ok_or("a cut setting")?;
        if (0x02..=0x05).contains(&id) {
            return Err("an HTTP/2 setting");
        }
        if ids.contains(&id) {
            return Err("a setting twice");
        }
        ids.push(id);
        payload = &payload[a + b..];
    }
    Ok(())
}

/// A QPACK encoder or decoder stream. With a table of capacity 0 the
/// client's encoder may only say so (Set Dynamic Table Capacity 0, the
/// byte 0x20); its decoder may only cancel streams (§4.4.2), since this
/// server's field sections never refer to a table to acknowledge.
async fn qpack_stream(conn: &quinn::Connection, mut recv: quinn::RecvStream, encoder: bool) {
    let mut buf = [0u8; 256];
    // Within a Stream Cancellation's integer (continuation bytes).
    let mut in_int = false;
    loop {
        let n = match recv.read(&mut buf).await {
            Ok(Some(n)) => n,
            Ok(None) | Err(_) => {
                return close(conn, code::CLOSED_CRITICAL_STREAM, "a QPACK stream ended")
            }
        };
        for &b in &buf[..n] {
            let fine = if encoder {
                b == 0x20
            } else if in_int {
                in_int = b & 0x80 != 0;
                true
            } else if b & 0xc0 == 0x40 {
                in_int = b & 0x3f == 0x3f;
                true
            } else {
                false
            };
            if !fine {
                let (code, why) = if encoder {
                    (code::QPACK_ENCODER_STREAM_ERROR, "a dynamic table was used")
                } else {
                    (
                        code::QPACK_DECODER_STREAM_ERROR,
                        "an acknowledgement of nothing",
                    )
                };
                return close(conn, code, why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_pairs_none_twice_none_of_http2s() {
        assert_eq!(settings(&[]), Ok(()));
        assert_eq!(settings(&[0x06, 0x44, 0x00, 0x01, 0x00]), Ok(()));
        // GREASE identifiers are fine.
        assert_eq!(settings(&[0x40, 0x21, 0x01]), Ok(()));
        assert!(settings(&[0x06, 0x01, 0x06, 0x02]).is_err());
        assert!(settings(&[0x04, 0x01]).is_err());
        assert!(settings(&[0x06]).is_err());
    }
}
