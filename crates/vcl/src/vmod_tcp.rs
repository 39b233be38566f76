//! vmod tcp: the client connection's TCP settings from VCL, with vmod
//! tcp's interface — `set_socket_pace(KB/s)` (SO_MAX_PACING_RATE, paced by
//! the kernel's TCP stack or the fq qdisc), `congestion_algorithm(name)`,
//! `get_estimated_rtt()` (milliseconds) and `dump_info()` (TCP_INFO into
//! the log). Settings stay on the connection for its later requests.

use crate::socket::ClientSocket;
use crate::types::scope::CLIENT;
use crate::types::{Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};

type R = Result<Value, crate::failure::VclFailure>;

fn socket<'c>(c: &'c mut Ctx<'_>, what: &str) -> Option<&'c dyn ClientSocket> {
    if c.host.client_socket().is_none() {
        c.host
            .error(&format!("tcp.{what}(): no client TCP connection"));
        return None;
    }
    c.host.client_socket()
}

fn set_socket_pace(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let kbs = a[0].as_i64();
    // Zero or less lifts the limit.
    let rate: u32 = if kbs <= 0 {
        u32::MAX
    } else {
        kbs.saturating_mul(1024).min(i64::from(u32::MAX - 1)) as u32
    };
    let Some(sock) = socket(c, "set_socket_pace") else {
        return Ok(Value::Unset);
    };
    let set = sock.set_pacing_rate(rate);
    // The rate as the kernel now holds it, as getsockopt() reports it.
    let held = match sock.pacing_rate() {
        Ok(now) => format!("getsockopt() 0 {now}"),
        Err(_) => "getsockopt() -1 0".to_string(),
    };
    match set {
        Ok(()) => c
            .host
            .log(format!("vmod-tcp: Socket paced to {kbs} KB/s.").as_bytes()),
        Err(_) => c.host.error("set_socket_pace(): Error setting pace rate."),
    }
    c.host.log(held.as_bytes());
    Ok(Value::Unset)
}

fn congestion_algorithm(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let name = a[0].as_bytes();
    let name = &name[..name.len().min(16)];
    let Some(sock) = socket(c, "congestion_algorithm") else {
        return Ok(Value::Int(-1));
    };
    let set = sock.set_congestion(name);
    let now = sock.congestion();
    if set.is_err() {
        let name = String::from_utf8_lossy(name);
        c.host.error(&format!(
            "TCP_CONGESTION setsockopt() for \"{name}\" failed."
        ));
        return Ok(Value::Int(-1));
    }
    if let Ok(now) = now {
        c.host
            .log(format!("getsockopt() returned: {now}").as_bytes());
    }
    Ok(Value::Int(0))
}

fn get_estimated_rtt(c: &mut Ctx<'_>, _: &[Value]) -> R {
    let Some(sock) = socket(c, "get_estimated_rtt") else {
        return Ok(Value::Real(0.0));
    };
    match sock.tcp_info() {
        Ok(info) => Ok(Value::Real(f64::from(info.rtt) / 1000.0)),
        Err(_) => {
            c.host.error("getsockopt() failed");
            Ok(Value::Real(0.0))
        }
    }
}

fn dump_info(c: &mut Ctx<'_>, _: &[Value]) -> R {
    let Some(sock) = socket(c, "dump_info") else {
        return Ok(Value::Unset);
    };
    let (info, congestion) = (sock.tcp_info(), sock.congestion());
    let Ok(i) = info else {
        c.host.error("getsockopt() failed");
        return Ok(Value::Unset);
    };
    let lines = [
        format!(
            "tcpi: snd_mss={} rcv_mss={} lost={} retrans={}",
            i.snd_mss, i.rcv_mss, i.lost, i.retrans
        ),
        format!(
            "tcpi2: pmtu={} rtt={} rttvar={} snd_cwnd={} advmss={} reordering={}",
            i.pmtu, i.rtt, i.rttvar, i.snd_cwnd, i.advmss, i.reordering
        ),
        format!(
            "tcpi3: pacing_rate={} max_pacing_rate={} congestion={}",
            i.pacing_rate,
            i.max_pacing_rate,
            congestion.unwrap_or_default()
        ),
    ];
    for line in lines {
        c.host.log(line.as_bytes());
    }
    Ok(Value::Unset)
}

static FUNCTIONS: &[FuncSpec] = &[
    FuncSpec {
        vmod: "tcp",
        name: "set_socket_pace",
        ret: Type::Void,
        params: &[req("rate", Type::Int)],
        scope: CLIENT,
        call: set_socket_pace,
    },
    FuncSpec {
        vmod: "tcp",
        name: "congestion_algorithm",
        ret: Type::Int,
        params: &[req("algorithm", Type::String)],
        scope: CLIENT,
        call: congestion_algorithm,
    },
    FuncSpec {
        vmod: "tcp",
        name: "get_estimated_rtt",
        ret: Type::Real,
        params: &[],
        scope: CLIENT,
        call: get_estimated_rtt,
    },
    FuncSpec {
        vmod: "tcp",
        name: "dump_info",
        ret: Type::Void,
        params: &[],
        scope: CLIENT,
        call: dump_info,
    },
];

pub const VMOD: Vmod = Vmod {
    name: "tcp",
    functions: FUNCTIONS,
    classes: &[],
};
