//! vmod tcp: the client connection's TCP settings from VCL, with vmod
//! tcp's interface — `set_socket_pace(KB/s)` (SO_MAX_PACING_RATE, paced by
//! the kernel's TCP stack or the fq qdisc), `congestion_algorithm(name)`,
//! `get_estimated_rtt()` (milliseconds) and `dump_info()` (TCP_INFO into
//! the log). Settings stay on the connection for its later requests.

use crate::types::scope::CLIENT;
use crate::types::{Type, Value};
use crate::vmod::{req, Ctx, FuncSpec, Vmod};

type R = Result<Value, String>;

/// `SO_MAX_PACING_RATE` (Linux 3.13), not in every libc binding.
const SO_MAX_PACING_RATE: libc::c_int = 47;

fn tcp_info(fd: i32) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len`
    // bytes into it and the descriptor belongs to the running request.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let r = libc::getsockopt(
            fd,
            libc::SOL_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (r == 0).then_some(info)
    }
}

fn congestion(fd: i32) -> Option<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: the buffer is `len` bytes long.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    let name = &name[..(len as usize).min(name.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn socket(c: &mut Ctx<'_>, what: &str) -> Option<i32> {
    let fd = c.host.client_socket();
    if fd.is_none() {
        c.host
            .error(&format!("tcp.{what}(): no client TCP connection"));
    }
    fd
}

fn set_socket_pace(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Some(fd) = socket(c, "set_socket_pace") else {
        return Ok(Value::Unset);
    };
    let kbs = a[0].as_i64();
    // Zero or less lifts the limit.
    let rate: u32 = if kbs <= 0 {
        u32::MAX
    } else {
        kbs.saturating_mul(1024).min(i64::from(u32::MAX - 1)) as u32
    };
    // SAFETY: the option takes a 32-bit rate in bytes per second.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            (&rate as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        c.host
            .log(format!("vmod-tcp: Socket paced to {kbs} KB/s.").as_bytes());
    } else {
        c.host.error("set_socket_pace(): Error setting pace rate.");
    }
    // The rate as the kernel now holds it.
    let mut now: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: the option reads back into a 32-bit rate.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MAX_PACING_RATE,
            (&mut now as *mut u32).cast(),
            &mut len,
        )
    };
    c.host.log(format!("getsockopt() {r} {now}").as_bytes());
    Ok(Value::Unset)
}

fn congestion_algorithm(c: &mut Ctx<'_>, a: &[Value]) -> R {
    let Some(fd) = socket(c, "congestion_algorithm") else {
        return Ok(Value::Int(-1));
    };
    let name = a[0].as_bytes();
    let name = &name[..name.len().min(16)];
    // SAFETY: the option reads `len` bytes of the name.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    let name = String::from_utf8_lossy(name);
    if r != 0 {
        c.host.error(&format!(
            "TCP_CONGESTION setsockopt() for \"{name}\" failed."
        ));
        return Ok(Value::Int(-1));
    }
    if let Some(now) = congestion(fd) {
        c.host
            .log(format!("getsockopt() returned: {now}").as_bytes());
    }
    Ok(Value::Int(0))
}

fn get_estimated_rtt(c: &mut Ctx<'_>, _: &[Value]) -> R {
    let Some(fd) = socket(c, "get_estimated_rtt") else {
        return Ok(Value::Real(0.0));
    };
    match tcp_info(fd) {
        Some(info) => Ok(Value::Real(f64::from(info.tcpi_rtt) / 1000.0)),
        None => {
            c.host.error("getsockopt() failed");
            Ok(Value::Real(0.0))
        }
    }
}

fn dump_info(c: &mut Ctx<'_>, _: &[Value]) -> R {
    let Some(fd) = socket(c, "dump_info") else {
        return Ok(Value::Unset);
    };
    let Some(i) = tcp_info(fd) else {
        c.host.error("getsockopt() failed");
        return Ok(Value::Unset);
    };
    let lines = [
        format!(
            "tcpi: snd_mss={} rcv_mss={} lost={} retrans={}",
            i.tcpi_snd_mss, i.tcpi_rcv_mss, i.tcpi_lost, i.tcpi_retrans
        ),
        format!(
            "tcpi2: pmtu={} rtt={} rttvar={} snd_cwnd={} advmss={} reordering={}",
            i.tcpi_pmtu,
            i.tcpi_rtt,
            i.tcpi_rttvar,
            i.tcpi_snd_cwnd,
            i.tcpi_advmss,
            i.tcpi_reordering
        ),
        format!(
            "tcpi3: pacing_rate={} max_pacing_rate={} congestion={}",
            i.tcpi_pacing_rate,
            i.tcpi_max_pacing_rate,
            congestion(fd).unwrap_or_default()
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
