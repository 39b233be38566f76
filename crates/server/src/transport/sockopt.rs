//! The one module of the daemon that calls the C library: the client
//! socket's options as VCL sets and reads them (vmod tcp,
//! `std.set_ip_tos`), on a descriptor it is lent for one request; a
//! client socket's reads into a runtime's buffer without zeroing it
//! first (`recv_into`); a TCP listener's registration with the reactor
//! (`watch_listener`) and its deferred accept (`set_defer_accept`); the
//! program that steers a `SO_REUSEPORT` group's datagrams
//! (`attach_reuseport_program`); and
//! at start-up, the system's user and group names (a Unix socket's owner,
//! `-j unix,user=`), the work directory's lock and giving up root once
//! the sockets are bound.

#![allow(unsafe_code)]

use lacquer_vcl::{ClientSocket, TcpInfo};
use std::io;
use std::os::fd::RawFd;

/// `SO_MAX_PACING_RATE` (Linux 3.13), not in every libc binding.
const SO_MAX_PACING_RATE: libc::c_int = 47;

/// A client connection's descriptor, valid while its request runs (an
/// ESI include's is its page's own duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientFd(pub RawFd);

/// Sets a socket option of `fd`, a descriptor its caller keeps open for
/// the call, to `value`.
fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` and the length given is its size; the
    // caller keeps the descriptor open while the call runs.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl ClientFd {
    /// The descriptor is open while the request that lent it runs.
    fn set<T>(&self, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
        setsockopt(self.0, level, name, value)
    }

    /// Reads an option into `out`; returns the length the kernel wrote.
    fn get_into(&self, level: libc::c_int, name: libc::c_int, out: &mut [u8]) -> io::Result<usize> {
        let mut len = out.len() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `out`.
        let r = unsafe { libc::getsockopt(self.0, level, name, out.as_mut_ptr().cast(), &mut len) };
        if r == 0 {
            Ok((len as usize).min(out.len()))
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn is_ipv6(&self) -> bool {
        let mut domain = [0u8; 4];
        self.get_into(libc::SOL_SOCKET, libc::SO_DOMAIN, &mut domain)
            .is_ok_and(|_| i32::from_ne_bytes(domain) == libc::AF_INET6)
    }
}

impl ClientSocket for ClientFd {
    fn set_pacing_rate(&self, rate: u32) -> io::Result<()> {
        self.set(libc::SOL_SOCKET, SO_MAX_PACING_RATE, &rate)
    }

    fn pacing_rate(&self) -> io::Result<u32> {
        let mut rate = [0u8; 4];
        self.get_into(libc::SOL_SOCKET, SO_MAX_PACING_RATE, &mut rate)?;
        Ok(u32::from_ne_bytes(rate))
    }

    fn set_congestion(&self, name: &[u8]) -> io::Result<()> {
        let name = &name[..name.len().min(16)];
        // SAFETY: the kernel reads `name.len()` bytes of the name.
        let r = unsafe {
            libc::setsockopt(
                self.0,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name.as_ptr().cast(),
                name.len() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn congestion(&self) -> io::Result<String> {
        let mut name = [0u8; 16];
        let len = self.get_into(libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut name)?;
        let name = &name[..len];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        Ok(String::from_utf8_lossy(&name[..end]).into_owned())
    }

    fn tcp_info(&self) -> io::Result<TcpInfo> {
        let info = tcp_info_of(self.0)?;
        Ok(TcpInfo {
            snd_mss: info.tcpi_snd_mss,
            rcv_mss: info.tcpi_rcv_mss,
            lost: info.tcpi_lost,
            retrans: info.tcpi_retrans,
            pmtu: info.tcpi_pmtu,
            rtt: info.tcpi_rtt,
            rttvar: info.tcpi_rttvar,
            snd_cwnd: info.tcpi_snd_cwnd,
            advmss: info.tcpi_advmss,
            reordering: info.tcpi_reordering,
            pacing_rate: info.tcpi_pacing_rate,
            max_pacing_rate: info.tcpi_max_pacing_rate,
        })
    }

    fn set_tos(&self, tos: u8) -> io::Result<()> {
        let tos = libc::c_int::from(tos);
        if self.is_ipv6() {
            self.set(libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &tos)
        } else {
            self.set(libc::IPPROTO_IP, libc::IP_TOS, &tos)
        }
    }
}

/// Reads what the socket has into `buf`'s unfilled part, which need not
/// be initialised (a new connection's buffer is not: zeroing it would
/// cost more than the read); returns the count read.
pub(crate) fn recv_into(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut tokio::io::ReadBuf<'_>,
) -> io::Result<usize> {
    // SAFETY: only the kernel writes into the unfilled part, and only
    // the `n` bytes it reports are marked initialised.
    let n = socket2::SockRef::from(&fd).recv(unsafe { buf.unfilled_mut() })?;
    // SAFETY: the kernel wrote those `n` bytes.
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Ok(n)
}

/// Holds a listener's new connections back until their first bytes
/// come (`TCP_DEFER_ACCEPT`, what `accept_filter` turns on), for at
/// most `secs` seconds; 0 turns it off.
pub(crate) fn set_defer_accept(listener: std::os::fd::BorrowedFd<'_>, secs: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let secs = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
    setsockopt(
        listener.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_DEFER_ACCEPT,
        &secs,
    )
}

/// How many connections wait in a TCP listener's accept queue, complete
/// and not yet accepted (for a listening socket, `TCP_INFO`'s
/// `tcpi_unacked` is the queue's length).
pub(crate) fn accept_queue(listener: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    Ok(tcp_info_of(listener.as_raw_fd())?.tcpi_unacked)
}

/// The kernel's `TCP_INFO` of a TCP socket.
fn tcp_info_of(fd: i32) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data, valid all zeroes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// Gives the `SO_REUSEPORT` group of `socket` (bound) a classic BPF
/// program that picks, for each datagram, the index of the group's
/// socket that receives it (in the order they were bound); an index past
/// the group, or a program that fails, leaves the choice to the kernel's
/// hash.
pub(crate) fn attach_reuseport_program(
    socket: std::os::fd::BorrowedFd<'_>,
    program: &[libc::sock_filter],
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        // The kernel copies the program during the call and never writes
        // it.
        filter: program.as_ptr().cast_mut(),
    };
    setsockopt(
        socket.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_ATTACH_REUSEPORT_CBPF,
        &fprog,
    )
}

/// A TCP listener registered with the reactor for its readiness, so
/// that connections are accepted without being registered themselves.
pub(crate) fn watch_listener(
    listener: std::net::TcpListener,
) -> io::Result<tokio::io::unix::AsyncFd<std::net::TcpListener>> {
    // SAFETY: the listener owns its descriptor, and the `AsyncFd` owns the
    // listener from here on: nothing else closes or replaces it while it
    // is registered.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(listener, tokio::io::Interest::READABLE)
            .map_err(io::Error::from)
    }
}

/// A user as the system's user database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    pub uid: u32,
    pub gid: u32,
}

/// Looks a user up by name (or number).
pub(crate) fn user_by_name(name: &str) -> io::Result<User> {
    let c_name = c_string(name)?;
    // SAFETY: passwd is plain data, valid all zeroes.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16384];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to live memory of the size given; the
    // result points into `pw`, which outlives its use below.
    let r = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    if found.is_null() {
        if let Ok(uid) = name.parse::<u32>() {
            return Ok(User { uid, gid: uid });
        }
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no user \"{name}\""),
        ));
    }
    Ok(User {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Looks a group up by name (or number).
pub(crate) fn group_by_name(name: &str) -> io::Result<u32> {
    let c_name = c_string(name)?;
    // SAFETY: group is plain data, valid all zeroes.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16384];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as for getpwnam_r above.
    let r = unsafe {
        libc::getgrnam_r(
            c_name.as_ptr(),
            &mut gr,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    if found.is_null() {
        return name
            .parse::<u32>()
            .map_err(|_| io::Error::new(io::ErrorKind::NotFound, format!("no group \"{name}\"")));
    }
    Ok(gr.gr_gid)
}

/// The name of a user id, where the user database has one.
pub(crate) fn user_name(uid: u32) -> Option<String> {
    // SAFETY: passwd is plain data, valid all zeroes.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16384];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to live memory of the size given.
    let r =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if r != 0 || found.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The name of a group id, where the group database has one.
pub(crate) fn group_name(gid: u32) -> Option<String> {
    // SAFETY: group is plain data, valid all zeroes.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16384];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is to live memory of the size given.
    let r =
        unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if r != 0 || found.is_null() || gr.gr_name.is_null() {
        return None;
    }
    // SAFETY: gr_name points to a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(gr.gr_name) };
    Some(name.to_string_lossy().into_owned())
}

fn c_string(name: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name with a NUL byte"))
}

/// The process's effective user id.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Takes an exclusive lock on `file` without waiting (flock(2)): false
/// when another process holds one. The lock lasts as long as the file is
/// open in this process, and the kernel lets it go when the process ends,
/// however it ends.
pub(crate) fn try_lock(file: &std::fs::File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: a system call on a descriptor `file` keeps open for it.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// Becomes `user` (and `group`), keeping no supplementary groups: for
/// good, since the saved ids change too (the C library changes every
/// thread of the process).
pub(crate) fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    let check = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    // SAFETY: plain system calls on integers (an empty group list).
    unsafe {
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setresgid(gid, gid, gid))?;
        check(libc::setresuid(uid, uid, uid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn users_and_groups_are_found_by_name() {
        assert_eq!(user_by_name("root").unwrap(), User { uid: 0, gid: 0 });
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(user_name(4_000_000_000), None);
        assert_eq!(group_by_name("root").unwrap(), 0);
        assert_eq!(user_by_name("4242").unwrap().uid, 4242);
        assert!(user_by_name("no-such-user-here").is_err());
        assert!(group_by_name("no-such-group-here").is_err());
        assert!(user_by_name("a\0b").is_err());
    }

    #[test]
    fn the_accept_queue_counts_connections_not_yet_accepted() {
        use std::os::fd::AsFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 0);
        let clients: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // The handshake completes in the kernel, on another softirq than
        // the connecting call's at times.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while accept_queue(listener.as_fd()).unwrap() < 3 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 3);
        let _first = listener.accept().unwrap();
        assert_eq!(accept_queue(listener.as_fd()).unwrap(), 2);
        drop(clients);
    }

    #[test]
    fn options_round_trip_on_a_real_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let fd = ClientFd(client.as_raw_fd());
        fd.set_pacing_rate(1024 * 1000).unwrap();
        assert_eq!(fd.pacing_rate().unwrap(), 1024 * 1000);
        assert!(!fd.congestion().unwrap().is_empty());
        assert!(fd.tcp_info().unwrap().snd_mss > 0);
        fd.set_tos(0x10).unwrap();
        assert!(fd.set_congestion(b"no-such-algorithm").is_err());
    }
}
