//! The processes the harness starts: lock servers for `--transport tcp`
//! (`quorum-lock server`, or the benches' `ceiling-server`, one process per
//! node on 127.0.0.1), and how every child (redis-server, etcd, a
//! candidate of the election run) is found, waited for, dies with the
//! harness and is stopped by its PID, the same way for every one of them.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;

use crate::cli::RedisMode;
use crate::context::Context;

/// The executable `program` in a folder of PATH, if there is one: how the
/// harness finds `redis-server` and `etcd` before it starts them.
pub fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A server measured beside ours (`--redis`, `--etcd`), started when `mode`
/// wants it and `program` is on PATH: it and its status, or none and the
/// reason (a failed start also warned of on stderr); an error only where
/// `on` asked for it. `[flag, program, install]` word the reasons.
pub fn wanted<T>(
    mode: RedisMode,
    [flag, program, install]: [&str; 3],
    start: impl FnOnce(&Path) -> Result<(T, String), String>,
) -> Result<(Option<T>, String), String> {
    let binary = match (mode, on_path(program)) {
        (RedisMode::Off, _) => return Ok((None, format!("off ({flag} off)"))),
        (RedisMode::On, None) => {
            return Err(format!(
                "{flag} on, but there is no {program} on PATH ({install})"
            ))
        }
        (RedisMode::Auto, None) => {
            return Ok((None, format!("not run: no {program} on PATH ({install})")))
        }
        (_, Some(binary)) => binary,
    };
    match start(&binary) {
        Ok((server, status)) => Ok((Some(server), status)),
        Err(err) if mode == RedisMode::Auto => {
            eprintln!("locks: warning: {err}; running without {program}");
            Ok((None, format!("not run: {err}")))
        }
        Err(err) => Err(err),
    }
}

/// The client token every server started here accepts.
pub const TOKEN: &str = "bench-token";

/// Which server the processes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `quorum-lock server`.
    Ours,
    /// The benches' `ceiling-server`: our framing and handshake, every
    /// request answered at once, no lock table; with `threads` tokio
    /// workers, or a current-thread runtime for 0.
    Trivial { threads: usize },
}

/// The trivial server binary of the ceiling rows: `QUORUM_LOCK_CEILING_BIN`,
/// else the one Cargo built beside this harness.
pub fn trivial_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("QUORUM_LOCK_CEILING_BIN") {
        return Ok(path.into());
    }
    option_env!("CARGO_BIN_EXE_ceiling-server")
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .ok_or_else(|| {
            "the ceiling rows need the ceiling-server binary of the benches package; \
             build it with `cargo build --release -p quorum-lock-benches --bin ceiling-server` \
             and point QUORUM_LOCK_CEILING_BIN at it"
                .into()
        })
}

pub struct Servers {
    children: Vec<Child>,
    token_file: PathBuf,
    /// Where each server listens, in the order they were started.
    pub addrs: Vec<String>,
}

/// The server binary: `QUORUM_LOCK_BIN`, else the release build under
/// `CARGO_TARGET_DIR` when that is set, else under the workspace's `target/`.
pub fn binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("QUORUM_LOCK_BIN") {
        return Ok(path.into());
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
    };
    let path = target.join("release/quorum-lock");
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "ours over TCP (--transport tcp, --backend compare) needs the server binary at {}: run `cargo build --release -p quorum-lock-cli` \
             first, or point QUORUM_LOCK_BIN at one",
            path.display()
        ))
    }
}

impl Servers {
    /// Starts `nodes` servers of `kind`, and connects a client locker to
    /// each; ours run with `--validity validity` when it is given (else
    /// their default, 60 s).
    pub async fn start_kind(
        nodes: usize,
        validity: Option<Duration>,
        kind: Kind,
    ) -> Result<(Servers, Vec<Arc<dyn NetLocker>>), String> {
        let validity = match (validity, kind) {
            (Some(validity), Kind::Ours) => vec![format!("--validity={}ms", validity.as_millis())],
            _ => Vec::new(),
        };
        Servers::start_with(nodes, kind, &validity).await
    }

    /// [`start_kind`](Self::start_kind) with `extra` arguments for every
    /// server (`--scenario scale` raises the limits this way).
    pub async fn start_with(
        nodes: usize,
        kind: Kind,
        extra: &[String],
    ) -> Result<(Servers, Vec<Arc<dyn NetLocker>>), String> {
        let binary = match kind {
            Kind::Ours => binary()?,
            Kind::Trivial { .. } => trivial_binary()?,
        };
        let token_file =
            std::env::temp_dir().join(format!("quorum-lock-bench-{}.token", std::process::id()));
        std::fs::write(&token_file, TOKEN)
            .map_err(|e| format!("cannot write {}: {e}", token_file.display()))?;
        let mut servers = Servers {
            children: Vec::new(),
            token_file,
            addrs: Vec::new(),
        };
        let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
        for _ in 0..nodes {
            let mut command = Command::new(&binary);
            match kind {
                Kind::Ours => command.args([
                    "server",
                    "--listen",
                    "127.0.0.1:0",
                    "--no-quarantine",
                    "--token-file",
                ]),
                Kind::Trivial { threads } => command.args([
                    "--threads",
                    &threads.to_string(),
                    "--listen",
                    "127.0.0.1:0",
                    "--token-file",
                ]),
            }
            .arg(&servers.token_file)
            .args(extra);
            let mut child = command
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let stdout = child.stdout.take();
            servers.children.push(child);
            let mut line = String::new();
            if let Some(stdout) = stdout {
                BufReader::new(stdout)
                    .read_line(&mut line)
                    .context("cannot read the server's address")?;
            }
            let addr = line
                .trim()
                .strip_prefix("listening on ")
                .ok_or_else(|| format!("unexpected first line from the server: {line:?}"))?
                .to_owned();
            lockers.push(connect(&addr).await?);
            servers.addrs.push(addr);
        }
        Ok((servers, lockers))
    }

    /// A client locker of its own for each server: the connections of one
    /// more client process.
    pub async fn connect(&self) -> Result<Vec<Arc<dyn NetLocker>>, String> {
        connect_all(&self.addrs).await
    }

    /// The PIDs of the server processes.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Total user + system CPU of the server processes.
    pub fn cpu(&self) -> Option<Duration> {
        self.children
            .iter()
            .map(|c| crate::stats::pid_cpu(c.id()))
            .sum()
    }
}

/// A client locker connected to the server at `addr`.
pub async fn connect(addr: &str) -> Result<Arc<dyn NetLocker>, String> {
    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_secs(5);
    let locker = RemoteLocker::connect(addr.to_owned(), config)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    if !locker.is_online() {
        let why = locker
            .connect_error()
            .map_or(String::new(), |e| format!(": {e}"));
        return Err(format!(
            "the server at {addr} did not accept a connection{why}"
        ));
    }
    Ok(Arc::new(locker))
}

/// One client locker per address, in order.
pub async fn connect_all(addrs: &[String]) -> Result<Vec<Arc<dyn NetLocker>>, String> {
    crate::stats::gather(addrs, |addr| connect(addr)).await
}

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.children {
            // Our own children, not yet reaped, so their PIDs are still theirs.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.token_file);
    }
}

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

/// The first line of `binary --version`, for the banner.
pub fn version(binary: &Path) -> String {
    let out = Command::new(binary).arg("--version").output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    text.ok()
        .and_then(|t| t.lines().next().map(|l| l.trim().to_owned()))
        .unwrap_or_default()
}

/// Starts a server on free ports up to three times: a port found free can
/// be taken before the server binds it, and a few tries make that race
/// harmless. `start` fails outright (`Err`) when trying again cannot help,
/// and gives `Ok(Err(why))` when the server did not come up.
pub fn with_retries<T>(
    program: &str,
    mut start: impl FnMut(usize) -> Result<Result<T, String>, String>,
) -> Result<T, String> {
    let mut last_err = String::new();
    for attempt in 0..3 {
        match start(attempt)? {
            Ok(server) => return Ok(server),
            Err(err) => last_err = err,
        }
    }
    Err(format!("{program} did not come up: {last_err}"))
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
