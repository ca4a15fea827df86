//! `quorum-lock server` processes on 127.0.0.1 for the chaos run: started,
//! killed, restarted on the same port, paused and resumed by PID. `Drop`
//! kills every child that is still running, so a panic leaves nothing
//! behind.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::context::Context;
use crate::lock;

/// How long a starting server has to print its address.
const START_LIMIT: Duration = Duration::from_secs(15);
/// How long a restart keeps retrying while the port is still taken.
const REBIND_LIMIT: Duration = Duration::from_secs(10);
/// How long to wait for a SIGKILLed child to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(10);

/// The `quorum-lock` binary: `QUORUM_LOCK_BIN`, else next to this program's
/// own (`target/<profile>/chaos` -> `target/<profile>/quorum-lock`), else
/// the release build under `CARGO_TARGET_DIR` or the workspace's `target/`.
pub fn binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("QUORUM_LOCK_BIN") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(format!(
            "QUORUM_LOCK_BIN points at {}, which is not a file",
            path.display()
        ));
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/chaos -> target/<profile>/quorum-lock
        if let Some(profile_dir) = exe.parent() {
            candidates.push(profile_dir.join("quorum-lock"));
        }
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
    };
    candidates.push(target.join("release/quorum-lock"));
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "the chaos run needs the server binary, not found at {}: run \
         `cargo build --release -p quorum-lock-cli` first (it is another package of \
         the workspace), or point QUORUM_LOCK_BIN at one",
        tried.join(" or ")
    ))
}

/// Sends `sig` to `pid` with kill(2).
fn signal(pid: u32, sig: i32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    // SAFETY: kill(2) takes two integers and touches no memory of ours. The
    // pid is one of our own children that has not been reaped, so it cannot
    // have been reused by another process.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// SIGCONT (in case it is stopped), SIGKILL and reap, within REAP_LIMIT.
fn kill_child(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    signal(child.id(), libc::SIGCONT);
    let _ = child.kill();
    let start = Instant::now();
    while start.elapsed() < REAP_LIMIT {
        match child.try_wait() {
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            _ => return,
        }
    }
    eprintln!(
        "warning: server process {} did not exit within {REAP_LIMIT:?} of SIGKILL",
        child.id()
    );
}

struct Slot {
    addr: SocketAddr,
    log: PathBuf,
    /// None while killed (or after a failed restart).
    child: Mutex<Option<Child>>,
    paused: AtomicBool,
}

/// N `quorum-lock server` processes, owned: each is killed on drop.
pub struct ServerSet {
    bin: PathBuf,
    dir: PathBuf,
    keep_dir: AtomicBool,
    validity: Duration,
    client_token: String,
    admin_token: String,
    slots: Vec<Slot>,
}

impl ServerSet {
    /// [`ServerSet::start`] on a thread of the blocking pool, for async
    /// callers: it waits for each server to come up.
    pub async fn start_blocking(n: usize, validity: Duration) -> Result<ServerSet, String> {
        tokio::task::spawn_blocking(move || ServerSet::start(n, validity))
            .await
            .context("starting the servers panicked")?
    }

    /// Starts `n` servers on free 127.0.0.1 ports, brand new
    /// (`--no-quarantine`), with `validity`, and a client and an admin token
    /// in files of a scratch directory it owns (removed on drop).
    pub fn start(n: usize, validity: Duration) -> Result<ServerSet, String> {
        if validity.is_zero() {
            return Err("the server validity must be greater than zero".into());
        }
        let bin = binary()?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let tag = format!("{}-{nanos}", std::process::id());
        let dir = std::env::temp_dir().join(format!("quorum-lock-chaos-{tag}"));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create scratch dir {}: {e}", dir.display()))?;
        let mut set = ServerSet {
            bin,
            dir,
            keep_dir: AtomicBool::new(false),
            validity,
            client_token: format!("chaos-client-{tag}"),
            admin_token: format!("chaos-admin-{tag}"),
            slots: Vec::with_capacity(n),
        };
        for (name, token) in [
            ("token", &set.client_token),
            ("admin-token", &set.admin_token),
        ] {
            let path = set.dir.join(name);
            std::fs::write(&path, format!("{token}\n"))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        for i in 0..n {
            let log = set.dir.join(format!("server-{i}.log"));
            // On error `set` drops here and kills the servers already started.
            let (child, addr) = set
                .spawn("127.0.0.1:0", &log, true)
                .map_err(|e| format!("server {i} did not start: {e}"))?;
            set.slots.push(Slot {
                addr,
                log,
                child: Mutex::new(Some(child)),
                paused: AtomicBool::new(false),
            });
        }
        Ok(set)
    }

    /// Starts one server listening on `listen`, its stderr appended to `log`;
    /// returns once it printed its address.
    fn spawn(
        &self,
        listen: &str,
        log: &Path,
        brand_new: bool,
    ) -> Result<(Child, SocketAddr), String> {
        let mut log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let _ = writeln!(
            log_file,
            "=== chaos: starting `quorum-lock server --listen {listen}`{}",
            if brand_new { " --no-quarantine" } else { "" }
        );
        let mut command = Command::new(&self.bin);
        command
            .arg("server")
            .args(["--listen", listen])
            .arg("--token-file")
            .arg(self.dir.join("token"))
            .arg("--admin-token-file")
            .arg(self.dir.join("admin-token"))
            .arg("--validity")
            .arg(format!("{}ms", self.validity.as_millis().max(1)))
            .args(["--max-connections", "4096"]);
        if brand_new {
            command.arg("--no-quarantine");
        }
        for var in ["TOKEN", "ADMIN_TOKEN", "TOKEN_FILE", "ADMIN_TOKEN_FILE"] {
            command.env_remove(format!("QUORUM_LOCK_{var}"));
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        let Some(stdout) = child.stdout.take() else {
            kill_child(&mut child);
            return Err("no stdout pipe from the server".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Keep draining so the server never blocks on a full pipe; ends
            // when the process exits.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(START_LIMIT) {
            Ok(Some(Ok(line))) => Ok(line),
            Ok(None) => Err("it exited without printing its address".to_string()),
            Ok(Some(Err(e))) => Err(format!("cannot read its stdout: {e}")),
            Err(_) => Err(format!("no address printed within {START_LIMIT:?}")),
        };
        let line = match line {
            Ok(line) => line,
            Err(why) => {
                kill_child(&mut child);
                return Err(format!("{why}; its log ends with:\n{}", tail(log, 20)));
            }
        };
        match line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse::<SocketAddr>().ok())
        {
            Some(addr) => Ok((child, addr)),
            None => {
                kill_child(&mut child);
                Err(format!(
                    "unexpected first line {line:?} (expected 'listening on ADDR') from {}",
                    self.bin.display()
                ))
            }
        }
    }

    /// The servers' addresses, fixed for the run: restarts reuse the port.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.slots.iter().map(|s| s.addr).collect()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn client_token(&self) -> &str {
        &self.client_token
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The scratch directory (tokens and server logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Leave the scratch directory (with the server logs) in place on drop,
    /// e.g. after a failed check; returns its path.
    pub fn keep_dir(&self) -> &Path {
        self.keep_dir.store(true, Ordering::SeqCst);
        &self.dir
    }

    /// SIGKILL server `i` and reap it; no-op if it is already down or `i`
    /// is out of range.
    pub fn kill(&self, i: usize) {
        let Some(slot) = self.slots.get(i) else {
            return;
        };
        if let Some(mut child) = lock(&slot.child).take() {
            kill_child(&mut child);
        }
        slot.paused.store(false, Ordering::SeqCst);
    }

    /// Starts server `i` again on its port, in quarantine (no
    /// `--no-quarantine`), retrying for ~10 s while the port is still taken.
    /// Kills it first if it is still running.
    pub fn restart(&self, i: usize) -> Result<(), String> {
        let servers = self.slots.len();
        self.kill(i);
        let Some(slot) = self.slots.get(i) else {
            return Err(format!("no server {i} (there are {servers})"));
        };
        let (addr, log) = (slot.addr, slot.log.clone());
        let start = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.spawn(&addr.to_string(), &log, false) {
                Ok((child, got)) if got == addr => {
                    if let Some(slot) = self.slots.get(i) {
                        *lock(&slot.child) = Some(child);
                        slot.paused.store(false, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                Ok((mut child, got)) => {
                    kill_child(&mut child);
                    return Err(format!("server {i} restarted on {got} instead of {addr}"));
                }
                Err(_) if start.elapsed() < REBIND_LIMIT => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(err) => {
                    return Err(format!(
                        "cannot restart server {i} on {addr} ({attempts} attempts in {:?}): {err}",
                        start.elapsed()
                    ))
                }
            }
        }
    }

    /// SIGSTOP server `i`: it keeps its connections and entries but answers
    /// nobody. No-op if it is down or `i` is out of range.
    pub fn pause(&self, i: usize) {
        self.stop_or_continue(i, true);
    }

    /// SIGCONT server `i`. No-op if it is down or `i` is out of range.
    pub fn resume(&self, i: usize) {
        self.stop_or_continue(i, false);
    }

    /// SIGSTOP (`stop`) or SIGCONT to server `i` if it is running, and
    /// records whether it is paused now.
    fn stop_or_continue(&self, i: usize, stop: bool) {
        let Some(slot) = self.slots.get(i) else {
            return;
        };
        let mut child = lock(&slot.child);
        let running =
            (child.as_mut()).and_then(|c| matches!(c.try_wait(), Ok(None)).then(|| c.id()));
        if let Some(pid) = running {
            signal(pid, if stop { libc::SIGSTOP } else { libc::SIGCONT });
        }
        if running.is_some() || !stop {
            slot.paused.store(stop, Ordering::SeqCst);
        }
    }

    /// Running and not paused.
    pub fn is_up(&self, i: usize) -> bool {
        let Some(slot) = self.slots.get(i) else {
            return false;
        };
        if slot.paused.load(Ordering::SeqCst) {
            return false;
        }
        let mut child = lock(&slot.child);
        matches!(child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Whether server `i` is stopped by `pause`.
    pub fn is_paused(&self, i: usize) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| s.paused.load(Ordering::SeqCst))
    }

    /// The last `lines` lines of server `i`'s log (its stderr, over all its
    /// starts), for failure reports.
    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        match self.slots.get(i) {
            Some(slot) => tail(&slot.log, lines),
            None => format!("(no server {i})"),
        }
    }
}

/// The last `lines` lines of the file, reading at most its last 1 MiB.
fn tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 1 << 20;
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > WINDOW {
        let _ = file.seek(SeekFrom::Start(len - WINDOW));
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.take(WINDOW).read_to_end(&mut bytes) {
        return format!("(cannot read {}: {e})", path.display());
    }
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Drop for ServerSet {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Some(mut child) = lock(&slot.child).take() {
                kill_child(&mut child);
            }
        }
        if !self.keep_dir.load(Ordering::SeqCst) && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("server logs kept in {}", self.dir.display());
        }
    }
}

/// What the servers at `addrs` still hold, as "addr: resource uid" lines,
/// read with the admin token once the run is over and a validity has gone
/// twice: whatever is left is kept alive by something.
pub async fn leftovers(addrs: &[SocketAddr], admin: &str) -> Result<Vec<String>, String> {
    use quorum_lock::net::{RemoteConfig, RemoteLocker};
    use quorum_lock::NetLocker;
    let mut leaked = Vec::new();
    for addr in addrs {
        let node = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(admin))
            .await
            .map_err(|e| format!("admin connection to {addr}: {e}"))?;
        let held = node
            .locks()
            .await
            .map_err(|e| format!("listing {addr}: {e}"))?;
        leaked.extend(
            held.into_iter()
                .map(|l| format!("{addr}: {} {}", l.resource, l.uid)),
        );
    }
    Ok(leaked)
}

/// The exit of a run: success when every check passed; otherwise the
/// command that reruns it (`rerun`), or why it could not run.
pub fn exit(
    outcome: Result<bool, String>,
    rerun: impl FnOnce() -> String,
) -> std::process::ExitCode {
    match outcome {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => {
            println!("FAILED: rerun with {}", rerun());
            std::process::ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("chaos run could not run: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
