//! The command `run` executes under the lock, and `elect` while leading:
//! spawning it, stopping it (and, by default, everything it started) when
//! the lock is lost or a stop signal arrives, and ending what it left
//! running in its process group when it exits.
//!
//! Invariant: [`Job::supervise`] returns only once the command's process
//! group is empty ([`Rest::Gone`]), or when that cannot be known or waited
//! for ([`Rest::Unfollowed`], [`Rest::Stuck`]), which the callers treat as
//! "something may still run": they do not free the lock at once then.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::fail::{Failure, CANNOT_EXECUTE, FAILURE, NOT_FOUND};
use crate::signals::{sys, Signals, Stop};

/// What ended the command's main process in [`Job::supervise`].
pub enum Ended {
    /// The command exited on its own, with this status.
    Exited(ExitStatus),
    /// What it ran under was lost; the command was stopped.
    Lost,
    /// A stop signal arrived; it was forwarded and the command was
    /// stopped.
    Stopped(Stop),
}

/// What is left of the command once [`Job::supervise`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// Nothing: the command and every process of its group are gone.
    Gone,
    /// The command is gone; what it started is not followed, since it ran
    /// in quorum-lock's own process group (`--foreground`).
    Unfollowed,
    /// Processes of its group outlived SIGKILL (stuck in the kernel), and
    /// waiting for them was given up: the lock was lost, or another stop
    /// signal came.
    Stuck,
}

/// How [`Job::supervise`] ended, and what is left.
pub struct Outcome {
    pub ended: Ended,
    pub rest: Rest,
    /// A stop signal that arrived while the rest of the group was being
    /// ended (forwarded to it).
    pub late_stop: Option<Stop>,
}

/// How often the end of the command's group is checked.
const POLL: Duration = Duration::from_millis(20);

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
    /// Leave [`SECRETS`] in the command's environment (`--pass-secrets`),
    /// and the database drivers' own (see [`DatabaseSecrets`]).
    pub pass_secrets: bool,
    /// The database drivers' password variables this run uses.
    pub database_secrets: DatabaseSecrets,
}

/// The variables of the database drivers that hold or locate the
/// credentials (a password, a client key) of a database node whose URL
/// gives none: removed from the
/// command's environment, as [`SECRETS`] are, when the nodes include a
/// database of that kind (a job that uses them for a database of its own,
/// beside lock servers, keeps them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseSecrets {
    /// `PGPASSWORD`, `PGPASSFILE`, and the client key `PGSSLKEY` (the
    /// driver takes PEM text in it as the key itself) with its certificate
    /// `PGSSLCERT`: a PostgreSQL node.
    pub postgres: bool,
    /// `MYSQL_PWD`: a MySQL or MariaDB node.
    pub mysql: bool,
}

impl DatabaseSecrets {
    /// Those of the node list `nodes` (URLs separated by commas).
    pub fn of(nodes: Option<&str>) -> DatabaseSecrets {
        let mut found = DatabaseSecrets::default();
        for node in nodes.unwrap_or_default().split([',', ';']) {
            // A group's first node follows its id: `east=postgres://...`.
            let scheme = node.trim().split_once("://").map(|(before, _)| {
                let scheme = before.rsplit('=').next().unwrap_or(before);
                scheme.trim().to_ascii_lowercase()
            });
            match scheme.as_deref() {
                Some("postgres" | "postgresql") => found.postgres = true,
                Some("mysql" | "mariadb") => found.mysql = true,
                _ => {}
            }
        }
        found
    }

    fn names(self) -> impl Iterator<Item = &'static str> {
        let postgres = ["PGPASSWORD", "PGPASSFILE", "PGSSLKEY", "PGSSLCERT"]
            .into_iter()
            .filter(move |_| self.postgres);
        let mysql = ["MYSQL_PWD"].into_iter().filter(move |_| self.mysql);
        postgres.chain(mysql)
    }
}

/// The variables of quorum-lock's environment that hold a secret or say
/// where one is: the tokens and their files (either token may force locks
/// open: the client token releases nothing it does not hold, but holds any
/// lock it likes), the node lists (URLs with database and Redis
/// passwords), and the TLS client key and its certificate. The command
/// does not get them unless `--pass-secrets` says so; the certificate goes
/// with its key, since one without the other is refused.
pub const SECRETS: [&str; 8] = [
    "QUORUM_LOCK_TOKEN",
    "QUORUM_LOCK_TOKEN_FILE",
    "QUORUM_LOCK_ADMIN_TOKEN",
    "QUORUM_LOCK_ADMIN_TOKEN_FILE",
    "QUORUM_LOCK_NODES",
    "QUORUM_LOCK_REDIS",
    "QUORUM_LOCK_TLS_CERT",
    "QUORUM_LOCK_TLS_KEY",
];

pub struct Job {
    child: Child,
    /// Where signals go: the child's pid, or minus its process group id.
    #[cfg_attr(not(unix), allow(dead_code))]
    target: i32,
    /// The command's exit status, once it was reaped.
    status: Option<ExitStatus>,
}

impl Job {
    /// Starts `argv` with the terminal's stdio, and the environment changed
    /// by `env`: a variable with a value is set, one without is removed (so
    /// that a value inherited from an outer `run` cannot pass for ours).
    /// [`SECRETS`] are removed unless `how` passes them. See [`Spawn`] for
    /// the rest of `how`.
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
        if !how.pass_secrets {
            for name in SECRETS.into_iter().chain(how.database_secrets.names()) {
                command.env_remove(name);
            }
            // Our own environment still holds them, and a process of the
            // same user reads it in /proc/<pid>/environ unless this one is
            // not dumpable. The command starts dumpable again (exec resets
            // the flag), so only quorum-lock itself is affected: no core
            // dump, no ptrace by the same user.
            #[cfg(target_os = "linux")]
            // SAFETY: prctl(2) with PR_SET_DUMPABLE changes a flag of this
            // process only; it takes no pointers.
            unsafe {
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            }
        }
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
            status: None,
        })
    }

    /// Waits until the command exits, `lost` fires or a stop signal
    /// arrives, then ends the rest of its process group and waits until it
    /// is gone, so that nothing of the command outlives what it ran under:
    ///
    /// * SIGTERM (or the stop signal received) to the group, unless the
    ///   command exited and left nothing running;
    /// * SIGKILL to whatever is left of it `grace` later;
    /// * then, while `lost` has not fired, wait until the group is gone
    ///   (saying so after `allowance`), or until another stop signal.
    ///   After a loss the wait ends `allowance` after SIGKILL: a lost lock
    ///   may be granted again while the group lives, which the caller's
    ///   safety margin must cover ([`Rest::Stuck`]).
    ///
    /// A stop signal during that is forwarded to the group
    /// ([`Outcome::late_stop`]). The caller keeps what the command ran
    /// under held, and refreshed, until this returns.
    ///
    /// Processes that left the group (`setsid`, `setpgid`, a shell's job
    /// control) are out of reach, and so is everything but the command
    /// itself when it runs in quorum-lock's own group.
    pub async fn supervise(
        &mut self,
        lost: impl Future<Output = ()>,
        signals: &mut Signals,
        grace: Duration,
        allowance: Duration,
    ) -> Result<Outcome, Failure> {
        let mut lost = std::pin::pin!(lost);
        let mut is_lost = false;
        let ended = tokio::select! {
            status = self.child.wait() => {
                let status = status.map_err(cannot_wait)?;
                self.status = Some(status);
                Ended::Exited(status)
            }
            () = lost.as_mut() => {
                is_lost = true;
                Ended::Lost
            }
            stop = signals.recv() => Ended::Stopped(stop),
        };
        let first = match ended {
            Ended::Stopped(stop) => stop.number(),
            _ => sys::SIGTERM,
        };
        let mut late_stop = None;
        let kill_at = Instant::now() + grace;
        let mut killed_at: Option<Instant> = None;
        let mut said = false;
        if !self.rest_gone()? {
            self.send(first);
        }
        loop {
            if self.rest_gone()? {
                let rest = if cfg!(unix) && self.target < 0 {
                    Rest::Gone
                } else {
                    Rest::Unfollowed
                };
                return Ok(Outcome {
                    ended,
                    rest,
                    late_stop,
                });
            }
            let now = Instant::now();
            match killed_at {
                None if now >= kill_at => {
                    tracing::warn!(?grace, "the command's group ignored the signal; killing it");
                    self.send(sys::SIGKILL);
                    killed_at = Some(now);
                }
                Some(at) if now >= at + allowance => {
                    let after = humantime::format_duration(allowance);
                    if is_lost {
                        crate::words::warn(&format!(
                            "the command's process group is still alive \
                             {after} after SIGKILL; the lock may be granted to someone else \
                             before it is gone"
                        ));
                        return Ok(Outcome {
                            ended,
                            rest: Rest::Stuck,
                            late_stop,
                        });
                    }
                    if !said {
                        said = true;
                        crate::words::warn(&format!(
                            "the command's process group is still alive \
                             {after} after SIGKILL; still holding until it is gone (SIGINT or \
                             SIGTERM gives up waiting and leaves what it holds to expire)"
                        ));
                    }
                }
                _ => {}
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = lost.as_mut(), if !is_lost => is_lost = true,
                stop = signals.recv() => {
                    late_stop = Some(stop);
                    if killed_at.is_some() {
                        // Only the kernel can end the group now; the
                        // operator gave up waiting for it.
                        return Ok(Outcome { ended, rest: Rest::Stuck, late_stop });
                    }
                    self.send(stop.number());
                }
            }
        }
    }

    /// Whether everything of the command that is followed is gone: the
    /// command itself (reaped here if it exited), and, in its own group,
    /// every other process of the group.
    fn rest_gone(&mut self) -> Result<bool, Failure> {
        if self.status.is_none() {
            self.status = self.child.try_wait().map_err(cannot_wait)?;
        }
        if self.status.is_none() {
            return Ok(false);
        }
        #[cfg(unix)]
        {
            Ok(self.target > 0 || sys::group_gone(-self.target))
        }
        #[cfg(not(unix))]
        Ok(true)
    }

    /// Sends `signal` to the command's group, or to the command alone
    /// with `--foreground` (never once it was reaped: its pid may be
    /// another process's by then).
    #[cfg(unix)]
    fn send(&mut self, signal: i32) {
        if self.target > 0 && self.status.is_some() {
            return;
        }
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

fn cannot_wait(err: io::Error) -> Failure {
    Failure::new(FAILURE, format!("cannot wait for the command: {err}"))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use clap::CommandFactory;

    use super::SECRETS;
    use crate::args::Cli;

    /// Every QUORUM_LOCK_* variable the flags read, in every subcommand.
    fn variables(command: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in command.get_arguments() {
            if let Some(name) = arg.get_env() {
                out.insert(name.to_string_lossy().into_owned());
            }
        }
        for sub in command.get_subcommands() {
            variables(sub, out);
        }
    }

    #[test]
    fn every_variable_that_holds_or_locates_a_secret_is_kept_from_the_command() {
        let mut all = BTreeSet::new();
        variables(&Cli::command(), &mut all);
        for secret in SECRETS {
            assert!(
                all.contains(secret),
                "{secret} is no variable the flags read"
            );
        }
        // The rest say where to find public things, or how to name keys.
        let public: BTreeSet<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|v| !SECRETS.contains(v))
            .collect();
        assert_eq!(
            public,
            BTreeSet::from([
                "QUORUM_LOCK_REDIS_CA",
                "QUORUM_LOCK_REDIS_PREFIX",
                "QUORUM_LOCK_SQL_PREFIX",
                "QUORUM_LOCK_TLS_CA",
            ]),
            "a new variable: is it a secret (add it to SECRETS) or not (add it here)?"
        );
    }

    /// A database listed first in a group of `--nodes` follows the
    /// group's id; its driver's secrets are still kept from the command.
    #[test]
    fn the_database_secrets_of_every_group_are_known_through_their_ids() {
        use super::DatabaseSecrets;
        let found = DatabaseSecrets::of(Some("east=postgres://db1/x,a:1;west=MariaDB://db2/x"));
        assert_eq!(
            found,
            DatabaseSecrets {
                postgres: true,
                mysql: true
            }
        );
        assert_eq!(
            DatabaseSecrets::of(Some("a:1;b=c:1")),
            DatabaseSecrets::default()
        );
    }
}
