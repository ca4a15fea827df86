//! The child processes the harness starts (redis-server, etcd, a
//! candidate of the election run): each dies with the harness and is
//! stopped by its PID, the same way for every one of them.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::context::Context;

/// Makes the kernel kill the child if the thread that started it dies
/// without running destructors (SIGKILL, abort).
pub fn dies_with_parent(command: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe and touches no memory of the
    // parent.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        })
    }
}

/// SIGTERM to the child's PID, then SIGKILL if it lingers past `grace`.
pub fn stop(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill has no memory effects; the PID is our own child,
        // not yet reaped, so it cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let give_up = Instant::now() + grace;
    while Instant::now() < give_up {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .context("cannot find a free port on 127.0.0.1")
}

/// Polls 127.0.0.1:`port` every `every` until `ready` says the server
/// answered `request` as it should, the child exits, or `limit` passes.
pub fn wait_ready(
    child: &mut Child,
    port: u16,
    (limit, every, read_timeout): (Duration, Duration, Duration),
    request: &[u8],
    ready: impl Fn(&mut TcpStream) -> bool,
) -> Result<(), String> {
    let give_up = Instant::now() + limit;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it exited with {status}"));
        }
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200))
            && s.set_read_timeout(Some(read_timeout)).is_ok()
            && s.write_all(request).is_ok()
            && ready(&mut s)
        {
            return Ok(());
        }
        if Instant::now() >= give_up {
            return Err(format!("no answer on port {port} within {limit:?}"));
        }
        std::thread::sleep(every);
    }
}
