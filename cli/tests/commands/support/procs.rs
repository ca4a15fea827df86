//! Guards for the processes the tests start: lock servers and
//! `quorum-lock` clients. `Drop` kills whatever is still running, so a
//! failing test leaves nothing behind.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{bin, signal, wait_bounded, Scratch, SIGTERM, VALIDITY};

/// A `quorum-lock server` process.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Server {
    /// Starts a server on a free port with the test tokens and validity.
    pub fn start(dir: &Scratch, extra: &[&str]) -> Server {
        Self::start_with_validity(dir, VALIDITY, extra)
    }

    /// Starts a server on a free port with the test tokens and `validity`.
    ///
    /// The port lies below the kernel's ephemeral range when it has room
    /// there (tests/common/ports.rs), so that a test can kill the server
    /// and start it again on the same port: a port of the ephemeral range,
    /// once free, may be taken meanwhile by any outgoing connection or
    /// `bind` to port 0 of any test (one was, and the restart found it in
    /// use for the whole 10 s it retried).
    pub fn start_with_validity(dir: &Scratch, validity: &str, extra: &[&str]) -> Server {
        for _ in 0..20 {
            let listen = match crate::ports::below_the_ephemeral_range() {
                Some(port) => format!("127.0.0.1:{port}"),
                None => "127.0.0.1:0".to_owned(),
            };
            match Self::try_start(dir, &listen, validity, extra) {
                Ok(server) => return server,
                // Taken by another test's server: another port.
                Err(err) if err.contains("Address already in use") => continue,
                Err(err) => panic!("server did not start: {err}"),
            }
        }
        panic!("server did not start: 20 ports below the ephemeral range were in use");
    }

    /// Starts a server on `addr`, retrying for a few seconds while the port
    /// is still taken (a server that was just killed).
    pub fn restart_at(dir: &Scratch, addr: SocketAddr, extra: &[&str]) -> Server {
        let start = Instant::now();
        loop {
            match Self::try_start(dir, &addr.to_string(), VALIDITY, extra) {
                Ok(server) => return server,
                Err(err) if start.elapsed() < Duration::from_secs(10) => {
                    eprintln!("rebinding {addr}: {err}; retrying");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(err) => panic!("cannot restart a server on {addr}: {err}"),
            }
        }
    }

    /// Starts a server on `listen` with `validity`, or says why it did not
    /// start (its log included).
    pub fn try_start(
        dir: &Scratch,
        listen: &str,
        validity: &str,
        extra: &[&str],
    ) -> Result<Server, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let log = dir.file(&format!(
            "server-{}.log",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let stderr = std::fs::File::create(&log).expect("create server log");
        let mut child = Command::new(bin())
            .args(["server", "--listen", listen, "--token-file", &dir.token()])
            .args(["--admin-token-file", &dir.admin(), "--validity", validity])
            .args(extra)
            .env("RUST_LOG", "info")
            .env_remove("QUORUM_LOCK_TOKEN")
            .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn quorum-lock server");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Keep draining so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                let log_text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!(
                    "no 'listening on' line ({other:?}); log: {log_text}"
                ));
            }
        };
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Ok(Server { child, addr, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, by pid, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Comma-separated addresses, as `--nodes` wants them.
pub fn nodes(servers: &[Server]) -> String {
    servers
        .iter()
        .map(|s| s.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A `quorum-lock` client process with its output captured in files.
pub struct Cli {
    pub child: Child,
    out: PathBuf,
    err: PathBuf,
}

/// What a finished client process left.
#[derive(Debug)]
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Cli {
    /// Starts `quorum-lock ARGS` with no QUORUM_LOCK_* variables from the
    /// test's own environment, plus `env`.
    pub fn spawn(dir: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Cli {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let out = dir.file(&format!("cli-{n}.out"));
        let err = dir.file(&format!("cli-{n}.err"));
        let mut command = Command::new(bin());
        for var in [
            "NODES",
            "TOKEN",
            "ADMIN_TOKEN",
            "TOKEN_FILE",
            "ADMIN_TOKEN_FILE",
            "TLS_CA",
            "TLS_CERT",
            "TLS_KEY",
        ] {
            command.env_remove(format!("QUORUM_LOCK_{var}"));
        }
        let child = command
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .spawn()
            .expect("spawn quorum-lock");
        Cli { child, out, err }
    }

    /// What the process wrote to stdout so far.
    pub fn stdout_so_far(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// What the process wrote to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits at most `limit` for the process to exit.
    pub fn finish(mut self, limit: Duration) -> Finished {
        let status = wait_bounded(&mut self.child, limit, "quorum-lock client");
        Finished {
            code: status.code(),
            stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SIGTERM first: `run` then stops its command's whole process
            // group and releases the lock; SIGKILL if that takes too long.
            signal(self.child.id(), SIGTERM);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `quorum-lock ARGS` to completion within `limit`.
pub fn cli(dir: &Scratch, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Finished {
    Cli::spawn(dir, args, env).finish(limit)
}

/// `quorum-lock ARGS` with every log on (`RUST_LOG=trace`, which [`cli`]
/// removes) and no node list from the environment, to completion within
/// `limit`.
pub fn cli_with_logs(dir: &Scratch, args: &[&str], limit: Duration) -> Finished {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (out, err) = (
        dir.file(&format!("logged-{n}.out")),
        dir.file(&format!("logged-{n}.err")),
    );
    let mut child = Command::new(bin())
        .args(args)
        .env("RUST_LOG", "trace")
        .env_remove("QUORUM_LOCK_REDIS")
        .env_remove("QUORUM_LOCK_NODES")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn quorum-lock");
    let status = wait_bounded(&mut child, limit, "quorum-lock with logs");
    Finished {
        code: status.code(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    }
}

/// A `quorum-lock server` started under `ulimit -n`, with the test tokens
/// on a free port; killed by its pid when dropped.
pub struct LimitedServer {
    child: Child,
    /// Where it listens; `None` when it refused to start (it printed no
    /// address and exited, its reason in the log).
    pub addr: Option<SocketAddr>,
    pub log: PathBuf,
}

impl LimitedServer {
    /// Starts `quorum-lock server ... EXTRA` with at most `open_files` file
    /// descriptors, and waits (at most 15 s) for its address.
    pub fn start(dir: &Scratch, open_files: u32, extra: &[&str]) -> LimitedServer {
        let log = dir.file(&format!("server-ulimit-{open_files}.log"));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {open_files} && exec \"$0\" \"$@\""))
            .arg(bin())
            .args(["server", "--listen", "127.0.0.1:0"])
            .args([
                "--token-file",
                &dir.token(),
                "--admin-token-file",
                &dir.admin(),
            ])
            .args(extra)
            .env("RUST_LOG", "info")
            .env_remove("QUORUM_LOCK_TOKEN")
            .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("create server log"))
            .spawn()
            .expect("spawn sh");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {}
        });
        let mut server = LimitedServer {
            child,
            addr: None,
            log,
        };
        server.addr = match rx.recv_timeout(Duration::from_secs(15)) {
            Ok(Some(Ok(line))) => Some(
                line.trim()
                    .strip_prefix("listening on ")
                    .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
                    .parse()
                    .expect("an address"),
            ),
            Ok(None | Some(Err(_))) => None,
            Err(_) => panic!("no first line within 15 s: {}", server.log_text()),
        };
        server
    }

    /// What the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LimitedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
