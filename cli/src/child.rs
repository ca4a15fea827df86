//! The command `run` executes under the lock, and `elect` while leading:
//! spawning it, and stopping it (and, by default, everything it started)
//! when the lock is lost or a stop signal arrives.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::fail::{Failure, CANNOT_EXECUTE, FAILURE, NOT_FOUND};
use crate::signals::{sys, Signals, Stop};

/// How [`Job::supervise`] ended.
pub enum Ended {
    /// The command exited on its own (or could not be waited for).
    Exited(Result<ExitStatus, Failure>),
    /// What it ran under was lost; the command has been stopped.
    Lost,
    /// A stop signal arrived; it was forwarded and the command has been
    /// stopped.
    Stopped(Stop),
}

/// How to start the command.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spawn {
    /// The command leads a new process group, so that stopping it also
    /// stops the processes it started (a shell's `sleep`, a build's
    /// compilers).
    pub own_group: bool,
    /// Linux: the kernel SIGKILLs the command (not what it started) if
    /// quorum-lock dies first, e.g. of SIGKILL, so that it cannot outlive
    /// a lease that nobody refreshes any more. Ignored elsewhere.
    pub die_with_parent: bool,
}

pub struct Job {
    child: Child,
    /// Where signals go: the child's pid, or minus its process group id.
    #[cfg_attr(not(unix), allow(dead_code))]
    target: i32,
}

impl Job {
    /// Starts `argv` with the terminal's stdio, and the environment changed
    /// by `env`: a variable with a value is set, one without is removed (so
    /// that a value inherited from an outer `run` cannot pass for ours).
    /// See [`Spawn`] for `how`.
    ///
    /// With `die_with_parent`, call it from a thread that lives as long as
    /// the process (the main thread, as `block_on` does): Linux sends the
    /// signal when the thread that spawned the command ends.
    pub fn spawn(
        argv: &[OsString],
        env: &[(&str, Option<&str>)],
        how: Spawn,
    ) -> Result<Job, Failure> {
        let own_group = how.own_group;
        let Some((program, rest)) = argv.split_first() else {
            return Err(Failure::usage("no command given after --"));
        };
        let mut command = Command::new(program);
        command.args(rest);
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        // If we fail in some unexpected way, do not leave the command
        // running without the lock.
        command.kill_on_drop(true);
        #[cfg(unix)]
        if own_group {
            command.process_group(0);
        }
        #[cfg(target_os = "linux")]
        if how.die_with_parent {
            die_with_parent(&mut command);
        }
        let child = command.spawn().map_err(|e| {
            let shown = program.to_string_lossy();
            match e.kind() {
                io::ErrorKind::NotFound => {
                    Failure::new(NOT_FOUND, format!("command not found: {shown}"))
                }
                io::ErrorKind::PermissionDenied => {
                    Failure::new(CANNOT_EXECUTE, format!("cannot execute {shown}: {e}"))
                }
                _ => Failure::new(CANNOT_EXECUTE, format!("cannot start {shown}: {e}")),
            }
        })?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| {
                Failure::new(FAILURE, "the command exited before its pid could be read")
            })?;
        Ok(Job {
            child,
            target: if own_group { -pid } else { pid },
        })
    }

    /// Waits until the command exits, `lost` fires or a stop signal
    /// arrives. In the last two cases the command is stopped before this
    /// returns: SIGTERM (or the signal received) to it, SIGKILL after
    /// `grace`, as [`stop`](Self::stop) does.
    pub async fn supervise(
        &mut self,
        lost: impl Future<Output = ()>,
        signals: &mut Signals,
        grace: Duration,
        allowance: Duration,
    ) -> Result<Ended, Failure> {
        let ended = tokio::select! {
            status = self.wait() => return Ok(Ended::Exited(status)),
            () = lost => Ended::Lost,
            stop = signals.recv() => Ended::Stopped(stop),
        };
        let signal = match ended {
            Ended::Stopped(stop) => stop.number(),
            _ => sys::SIGTERM,
        };
        self.stop(signal, grace, allowance).await?;
        Ok(ended)
    }

    /// Waits for the command to exit.
    ///
    /// Cancel safe (tokio's `Child::wait` is), so it can sit in a `select!`.
    pub async fn wait(&mut self) -> Result<ExitStatus, Failure> {
        self.child
            .wait()
            .await
            .map_err(|e| Failure::new(FAILURE, format!("cannot wait for the command: {e}")))
    }

    /// Sends `signal`, waits up to `grace`, then SIGKILLs whatever is left
    /// and waits for it to be gone. A command that outlives SIGKILL by
    /// `allowance` (stuck in the kernel, e.g. on a dead NFS server) is
    /// reported, because a lost lock may be granted again while it lives.
    pub async fn stop(
        &mut self,
        signal: i32,
        grace: Duration,
        allowance: Duration,
    ) -> Result<ExitStatus, Failure> {
        self.send(signal);
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(result) => result
                .map_err(|e| Failure::new(FAILURE, format!("cannot wait for the command: {e}")))?,
            Err(_) => {
                tracing::warn!(?grace, "the command ignored the signal; killing it");
                self.send(sys::SIGKILL);
                match tokio::time::timeout(allowance, self.child.wait()).await {
                    Ok(result) => result.map_err(|e| {
                        Failure::new(FAILURE, format!("cannot wait for the command: {e}"))
                    })?,
                    Err(_) => {
                        eprintln!(
                            "quorum-lock: warning: the command is still alive {} after SIGKILL; \
                             the lock may be granted to someone else before it is gone",
                            humantime::format_duration(allowance)
                        );
                        self.wait().await?
                    }
                }
            }
        };
        // The leader is gone; members of its group that outlived it must
        // not keep working without the lock either.
        if self.target < 0 {
            self.send(sys::SIGKILL);
        }
        Ok(status)
    }

    /// Waits, at most `limit`, until everything the command started is
    /// gone too: its process group, once SIGKILLed after the command (see
    /// [`stop`](Self::stop)), empties when the kernel has killed its members
    /// and they were reaped. Returns whether it did. A command in
    /// quorum-lock's own group (`--foreground`) is not followed beyond
    /// itself: `false`, since what it started is not known.
    pub async fn all_gone(&self, limit: Duration) -> bool {
        #[cfg(unix)]
        {
            if self.target > 0 {
                return false;
            }
            let until = tokio::time::Instant::now() + limit;
            loop {
                if sys::gone(self.target) {
                    return true;
                }
                if tokio::time::Instant::now() >= until {
                    return false;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = limit;
            false
        }
    }

    #[cfg(unix)]
    fn send(&mut self, signal: i32) {
        if let Err(err) = sys::send(self.target, signal) {
            tracing::warn!(%err, signal, "cannot signal the command; killing it");
            let _ = self.child.start_kill();
        }
    }

    #[cfg(not(unix))]
    fn send(&mut self, _signal: i32) {
        let _ = self.child.start_kill();
    }
}

/// Has the kernel SIGKILL the command when quorum-lock dies (Linux's
/// PR_SET_PDEATHSIG), and makes it exit at once if quorum-lock died
/// before that was set.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    let parent = i32::try_from(std::process::id()).unwrap_or(0);
    let set = move || {
        // Between fork and exec only async-signal-safe calls are allowed:
        // prctl(2) and getppid(2) are system calls, and these errors carry
        // an errno without allocating.
        // SAFETY: prctl with PR_SET_PDEATHSIG takes integers only.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: getppid takes nothing and cannot fail.
        if unsafe { libc::getppid() } != parent {
            // quorum-lock died before the signal was armed: the command
            // must not start without anyone to stop it.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the closure makes only async-signal-safe calls (see above)
    // and touches no memory shared with other threads.
    unsafe {
        command.pre_exec(set);
    }
}

/// The exit code a shell would report for `status`: the code, or 128+N for
/// a command killed by signal N.
pub fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return (code & 0xff) as u8;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return (128 + (signal & 0x7f)) as u8;
        }
    }
    FAILURE
}
