//! What `expect` sees in a stream: the last frame taken (`frame.*` and
//! the per-type `ping.*`, `settings.*`, `goaway.*`, `rst.err`,
//! `winup.size`, `prio.*`, `push.id`), the stream (`stream.window`,
//! `stream.peer_window`, `stream.weight`, `stream.dependency`), the
//! HPACK tables (`tbl.dec.*`, `tbl.enc.*`) and the messages (`req.*`,
//! `resp.*`). An error code's name stands for its number; anything else
//! stands for itself. `None` is `<undef>`.

use super::conn::State;
use super::frame::{self, Frame, Meta};
use crate::fail;
use crate::trace::Step;

fn last(st: &mut State, id: u32, want: u8) -> Step<&Frame> {
    match &st.stream(id).frame {
        Some(f) if f.kind == want => Ok(f),
        _ => fail!("Last frame was not of type {}", frame::type_name(want)),
    }
}

fn yes(b: bool) -> Option<String> {
    Some(if b { "true" } else { "false" }.to_string())
}

pub fn resolve(st: &mut State, id: u32, spec: &str) -> Step<Option<String>> {
    let text = |b: &[u8]| Some(String::from_utf8_lossy(b).into_owned());
    match spec {
        "ping.data" => {
            if let Meta::Ping { data } = &last(st, id, frame::PING)?.meta {
                return Ok(text(data));
            }
        }
        "ping.ack" => return Ok(yes(last(st, id, frame::PING)?.flags & frame::ACK != 0)),
        "winup.size" => {
            if let Meta::WinUp { size } = last(st, id, frame::WINDOW_UPDATE)?.meta {
                return Ok(Some(size.to_string()));
            }
        }
        "prio.stream" | "prio.exclusive" | "prio.weight" => {
            if let Meta::Priority {
                stream,
                exclusive,
                weight,
            } = last(st, id, frame::PRIORITY)?.meta
            {
                return Ok(match spec {
                    "prio.stream" => Some(stream.to_string()),
                    "prio.exclusive" => yes(exclusive),
                    _ => Some(weight.to_string()),
                });
            }
        }
        "rst.err" => {
            if let Meta::Rst { err } = last(st, id, frame::RST_STREAM)?.meta {
                return Ok(Some(err.to_string()));
            }
        }
        "push.id" => {
            if let Meta::Headers { promised, .. } = last(st, id, frame::PUSH_PROMISE)?.meta {
                return Ok(Some(promised.to_string()));
            }
        }
        "stream.window" => {
            let w = if id == 0 {
                st.win_self.size
            } else {
                st.stream(id).win_self
            };
            return Ok(Some(w.to_string()));
        }
        "stream.peer_window" => {
            let w = if id == 0 {
                st.win_peer.size
            } else {
                st.stream(id).win_peer
            };
            return Ok(Some(w.to_string()));
        }
        "stream.weight" => return Ok((id != 0).then(|| st.stream(id).weight.to_string())),
        "stream.dependency" => return Ok((id != 0).then(|| st.stream(id).dependency.to_string())),
        _ => {}
    }
    if let Some(rest) = spec.strip_prefix("settings.") {
        let f = last(st, id, frame::SETTINGS)?;
        let Meta::Settings { values } = &f.meta else {
            return Ok(None);
        };
        return Ok(match rest {
            "ack" => yes(f.flags & frame::ACK != 0),
            "push" => values[2].and_then(|v| yes(v == 1)),
            "hdrtbl" => values[1].map(|v| v.to_string()),
            "maxstreams" => values[3].map(|v| v.to_string()),
            "winsize" => values[4].map(|v| v.to_string()),
            "framesize" => values[5].map(|v| v.to_string()),
            "hdrsize" => values[6].map(|v| v.to_string()),
            _ => Some(spec.to_string()),
        });
    }
    if let Some(rest) = spec.strip_prefix("goaway.") {
        let Meta::GoAway {
            last: ls,
            err,
            debug,
        } = &last(st, id, frame::GOAWAY)?.meta
        else {
            return Ok(None);
        };
        return Ok(match rest {
            "err" => Some(err.to_string()),
            "laststream" => Some(ls.to_string()),
            "debug" => debug.as_deref().and_then(text),
            _ => Some(spec.to_string()),
        });
    }
    if let Some(rest) = spec.strip_prefix("frame.") {
        let Some(f) = &st.stream(id).frame else {
            fail!("No frame received yet.");
        };
        return Ok(match rest {
            "data" => text(&f.payload),
            "type" => Some(f.kind.to_string()),
            "size" => Some(f.payload.len().to_string()),
            "stream" => Some(f.stream.to_string()),
            "padding" => match &f.meta {
                Meta::Data { padding, .. } | Meta::Headers { padding, .. }
                    if f.kind != frame::CONTINUATION =>
                {
                    Some(padding.to_string())
                }
                _ => fail!("Last frame was not of type DATA, HEADERS or PUSH"),
            },
            _ => Some(spec.to_string()),
        });
    }
    if let Some(rest) = spec.strip_prefix("tbl.") {
        return Ok(table_var(st, spec, rest));
    }
    if let Some(value) = message_var(st, id, spec) {
        return Ok(value);
    }
    if let Some(n) = frame::ERRORS.iter().position(|e| *e == spec) {
        return Ok(Some(n.to_string()));
    }
    Ok(Some(spec.to_string()))
}

/// `tbl.dec…` and `tbl.enc…`: the HPACK tables' size, bounds and entries.
fn table_var(st: &State, spec: &str, rest: &str) -> Option<String> {
    let text = |b: &[u8]| Some(String::from_utf8_lossy(b).into_owned());
    let (table, rest) = match (rest.strip_prefix("dec"), rest.strip_prefix("enc")) {
        (Some(r), _) => (&st.dec, r),
        (_, Some(r)) => (&st.enc, r),
        _ => return Some(spec.to_string()),
    };
    match rest {
        ".size" => return Some(table.size().to_string()),
        ".maxsize" => return Some(table.max_size().to_string()),
        ".length" => return Some(table.len().to_string()),
        _ => {}
    }
    // tbl.dec[N].key / .value: entry N of the dynamic table, from 1.
    if let Some((n, what)) = rest
        .strip_prefix('[')
        .and_then(|r| r.split_once("]."))
        .and_then(|(n, what)| Some((n.parse::<usize>().ok()?, what)))
    {
        let entry = table.get(n + 61).filter(|_| n > 0);
        return match what {
            "key" => entry.and_then(|e| text(&e.0)),
            "value" => entry.and_then(|e| text(&e.1)),
            _ => Some(spec.to_string()),
        };
    }
    Some(spec.to_string())
}

/// `req.…` and `resp.…`: the stream's request or response; None for
/// another name.
fn message_var(st: &mut State, id: u32, spec: &str) -> Option<Option<String>> {
    let text = |b: &[u8]| Some(String::from_utf8_lossy(b).into_owned());
    let request = spec.starts_with("req.");
    let rest = spec
        .strip_prefix("req.")
        .or_else(|| spec.strip_prefix("resp."));
    let rest = rest?;
    let s = st.stream(id);
    let headers = if request { &s.req } else { &s.resp };
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    Some(match rest {
        "body" => text(&s.body),
        "bodylen" => Some(s.body.len().to_string()),
        "status" => find(":status"),
        "url" => find(":path"),
        "method" => find(":method"),
        "authority" => find(":authority"),
        "scheme" => find(":scheme"),
        "proto" => Some("HTTP/2.0".to_string()),
        _ => match rest.strip_prefix("http.") {
            Some(h) => find(h),
            None => None,
        },
    })
}
