//! SIGINT and SIGTERM as one stream, and sending signals to a child's
//! process group.

use std::io;

/// A signal that asks us to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        }
    }

    /// The signal number, for forwarding and for the 128+N exit code.
    pub fn number(self) -> i32 {
        match self {
            Stop::Interrupt => sys::SIGINT,
            Stop::Terminate => sys::SIGTERM,
        }
    }
}

/// Listens for SIGINT (Ctrl-C) and SIGTERM. Installing replaces the default
/// "die at once" action, so do it before anything worth cleaning up exists.
pub struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Waits for the next stop signal.
    pub async fn recv(&mut self) -> Stop {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Stop::Interrupt,
                _ = self.terminate.recv() => Stop::Terminate,
            }
        }
        #[cfg(not(unix))]
        {
            // Without Ctrl-C support there is nothing to wait for.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            Stop::Interrupt
        }
    }
}

#[cfg(unix)]
pub mod sys {
    //! Signals to processes and process groups, which std does not offer.

    pub const SIGINT: i32 = libc::SIGINT;
    pub const SIGKILL: i32 = libc::SIGKILL;
    pub const SIGTERM: i32 = libc::SIGTERM;

    /// Sends `sig` to process `pid`, or to process group `-pid` when `pid`
    /// is negative. A target that is already gone is not an error.
    pub fn send(pid: i32, sig: i32) -> std::io::Result<()> {
        // SAFETY: kill(2) takes two integers and touches no memory of ours.
        if unsafe { libc::kill(pid, sig) } == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ESRCH) {
            // The process (group) already exited.
            Ok(())
        } else {
            Err(err)
        }
    }

    /// Whether process group `pgid` is gone: kill(2) with signal 0 finds
    /// no process in it, or (Linux) only zombies, which are dead but wait
    /// for a parent to reap them. An orphan's new parent may never do so
    /// (a container whose first process reaps nothing), and a zombie,
    /// which can neither run nor fork, keeps the group's id from being
    /// given to a new process.
    pub fn group_gone(pgid: i32) -> bool {
        // SAFETY: as in `send`; signal 0 only checks.
        if unsafe { libc::kill(-pgid, 0) } != 0 {
            // EPERM: members we may not signal (setuid programs) are alive.
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        #[cfg(target_os = "linux")]
        {
            only_zombies(pgid)
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Whether /proc shows members of group `pgid`, all of them zombies
    /// with no thread left running.
    /// A member /proc hides (`hidepid`) counts as alive: with none found,
    /// kill(2)'s word that the group exists stands.
    #[cfg(target_os = "linux")]
    fn only_zombies(pgid: i32) -> bool {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return false;
        };
        let mut zombies = 0;
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            // A process that ended meanwhile has no stat any more.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid pgrp ...`; comm may hold ')' and spaces.
            let Some((_, fields)) = stat.rsplit_once(')') else {
                continue;
            };
            let mut fields = fields.split_whitespace();
            let state = fields.next().unwrap_or("");
            let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
            if pgrp != Some(pgid) {
                continue;
            }
            if !ended(state) || !every_thread_ended(pid) {
                return false;
            }
            zombies += 1;
        }
        zombies > 0
    }

    #[cfg(target_os = "linux")]
    fn ended(state: &str) -> bool {
        matches!(state, "Z" | "X" | "x")
    }

    /// Whether every thread of process `pid` ended. /proc shows a process
    /// whose main thread exited (`SYS_exit`, not `exit_group`) as a zombie
    /// while its other threads still run: such a process still writes.
    #[cfg(target_os = "linux")]
    fn every_thread_ended(pid: u32) -> bool {
        // A process that was reaped meanwhile has no task list any more.
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true;
        };
        tasks.flatten().all(|task| {
            let path = task.path().join("stat");
            match std::fs::read_to_string(path) {
                Ok(stat) => stat
                    .rsplit_once(')')
                    .and_then(|(_, fields)| fields.split_whitespace().next())
                    .is_some_and(ended),
                // A thread that ended meanwhile has no stat any more.
                Err(_) => true,
            }
        })
    }
}

#[cfg(not(unix))]
pub mod sys {
    //! Placeholders so the signal numbers exist; children are stopped with
    //! `Child::start_kill` there.
    pub const SIGINT: i32 = 2;
    pub const SIGKILL: i32 = 9;
    pub const SIGTERM: i32 = 15;
}
