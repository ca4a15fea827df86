//! `redis-server` processes for the tests that need real Redis nodes: each
//! on a free loopback port, without persistence unless asked for
//! ([`RedisServer::start_persistent`]), stopped by its PID when dropped.
//!
//! Without `redis-server` on the PATH, [`RedisServer::start`] prints that
//! the test was skipped and returns `None`, unless `QUORUM_LOCK_REQUIRE_REDIS`
//! is set (as `.ci/run` does), which makes a missing server a failure.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{Error, LockArgs, LockMode, NetLocker};

/// A `redis-server` of this test, killed by its PID when dropped.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// Arguments after the defaults, kept for a restart.
    extra: Vec<String>,
    /// Serves TLS only: readiness is a TCP accept, not a plain PING.
    tls: bool,
    /// The data directory this test made for the server, removed on drop.
    data_dir: Option<std::path::PathBuf>,
}

impl RedisServer {
    /// A server on a free port; `None` (and a note on stderr) when
    /// `redis-server` is not installed and the environment does not require
    /// it.
    pub fn start() -> Option<RedisServer> {
        Self::start_with(&[])
    }

    /// A server on a free port with `extra` arguments after the defaults
    /// (a later setting overrides an earlier one).
    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        Self::launch(extra, false)
    }

    /// A server that speaks only TLS, with `cert` and `key` (PEM files),
    /// and `users` as extra arguments (for example ACL users).
    pub fn start_tls(cert: &str, key: &str, users: &[&str]) -> Option<RedisServer> {
        let mut extra = vec!["--tls-cert-file", cert, "--tls-key-file", key];
        extra.extend(["--tls-ca-cert-file", cert, "--tls-auth-clients", "no"]);
        extra.extend(users);
        Self::launch(&extra, true)
    }

    fn launch(extra: &[&str], tls: bool) -> Option<RedisServer> {
        // Below the ephemeral range: `restart` starts it again on this port.
        let port = crate::ports::restartable_port();
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        let child = match spawn(port, &extra, tls) {
            Ok(child) => child,
            Err(err) if std::env::var_os("QUORUM_LOCK_REQUIRE_REDIS").is_some() => {
                panic!("QUORUM_LOCK_REQUIRE_REDIS is set but redis-server cannot start: {err}")
            }
            Err(err) => {
                eprintln!(
                    "skipped: redis-server is not available ({err}); install it to run this test"
                );
                return None;
            }
        };
        let server = RedisServer {
            child: Some(child),
            port,
            extra,
            tls,
            data_dir: None,
        };
        server.wait_ready();
        Some(server)
    }

    /// A server that keeps its data in a directory of its own: no automatic
    /// saves, so the test decides what is on disk with `SAVE` (and, with
    /// `aof`, an append-only file synced every second as well), and
    /// [`restart`](Self::restart) brings back what was saved.
    pub fn start_persistent(aof: bool) -> Option<RedisServer> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("quorum-lock-redis-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a data directory for redis-server");
        let dir_arg = dir.to_str().expect("a UTF-8 temp dir").to_owned();
        let appendonly = if aof { "yes" } else { "no" };
        let extra = [
            "--dir",
            &dir_arg,
            "--dbfilename",
            "dump.rdb",
            "--appendonly",
            appendonly,
            "--appendfsync",
            "everysec",
        ];
        let mut server = Self::launch(&extra, false)?;
        server.data_dir = Some(dir);
        Some(server)
    }

    /// `count` servers, or `None` when `redis-server` is missing (see
    /// [`start`](Self::start)).
    pub fn start_many(count: usize) -> Option<Vec<RedisServer>> {
        (0..count).map(|_| RedisServer::start()).collect()
    }

    /// `redis://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PID of the running server process.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server with SIGSTOP: its port stays open, nothing answers.
    pub fn pause(&self) {
        signal(self.pid(), libc::SIGSTOP);
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        signal(self.pid(), libc::SIGCONT);
    }

    /// Kills the server and starts a new one on the same port, without
    /// persistence: it comes back with an empty key space.
    pub fn restart_empty(&mut self) {
        self.restart();
    }

    /// Kills the server with SIGKILL and starts it again on the same port
    /// with the same arguments: a server of
    /// [`start_persistent`](Self::start_persistent) comes back with what
    /// its directory holds, any other one empty.
    pub fn restart(&mut self) {
        self.kill();
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            match spawn(self.port, &self.extra, self.tls) {
                Ok(child) => {
                    self.child = Some(child);
                    if self.try_wait_ready(Duration::from_secs(2)) {
                        return;
                    }
                    // The port may still have been taken: try again.
                    self.kill();
                }
                Err(err) => panic!("cannot restart redis-server: {err}"),
            }
            assert!(
                Instant::now() < give_up,
                "redis-server did not come back on port {} within 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls with a raw PING until the server answers, for at most 10 s.
    fn wait_ready(&self) {
        assert!(
            self.try_wait_ready(Duration::from_secs(10)),
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    fn try_wait_ready(&self, within: Duration) -> bool {
        let give_up = Instant::now() + within;
        while Instant::now() < give_up {
            if let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)) {
                if self.tls {
                    return true;
                }
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                // Any answer means the server is up: PONG, or NOAUTH when
                // the default user is off.
                let mut reply = [0u8; 1];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut reply).is_ok()
                    && matches!(reply[0], b'+' | b'-')
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A paused server does not die of SIGKILL until it runs again
            // on some systems' process accounting; thaw it first.
            signal(child.id(), libc::SIGCONT);
        }
        self.kill();
        if let Some(dir) = self.data_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn spawn(port: u16, extra: &[String], tls: bool) -> std::io::Result<Child> {
    let port = port.to_string();
    let listen: [&str; 4] = if tls {
        ["--port", "0", "--tls-port", &port]
    } else {
        ["--port", &port, "--loglevel", "warning"]
    };
    Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--loglevel", "warning"])
        .args(listen)
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(std::env::temp_dir())
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
}

fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a PID fits pid_t");
    // SAFETY: kill(2) on a PID this test started and has not reaped.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// A `RedisLocker` for `server` with `validity`, no quarantine (the test
/// servers start fresh) and the default prefix.
pub async fn locker(server: &RedisServer, validity: Duration) -> Arc<dyn NetLocker> {
    locker_with(
        server,
        RedisConfig {
            validity,
            quarantine: Duration::ZERO,
            ..RedisConfig::default()
        },
    )
    .await
}

/// A `RedisLocker` for `server` with `config`.
pub async fn locker_with(server: &RedisServer, config: RedisConfig) -> Arc<dyn NetLocker> {
    Arc::new(
        RedisLocker::connect(&server.url(), config)
            .await
            .expect("connect to the test redis-server"),
    )
}

/// A plain connection to `server`, for what a test does behind the
/// lockers' backs (`SAVE`, `CONFIG SET`, reading keys). It speaks just
/// enough RESP for that, so that the library's tests need no Redis client
/// crate of their own.
pub async fn raw(server: &RedisServer) -> Raw {
    let stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, server.port))
        .await
        .expect("connect to the test redis-server");
    Raw {
        conn: Arc::new(tokio::sync::Mutex::new(tokio::io::BufStream::new(stream))),
    }
}

/// A RESP connection shared by clones; one command at a time.
#[derive(Clone)]
pub struct Raw {
    conn: Arc<tokio::sync::Mutex<tokio::io::BufStream<tokio::net::TcpStream>>>,
}

/// One RESP reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    /// The reply as text: a status, a bulk string or an integer.
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Int(n) => n.to_string(),
            other => panic!("expected a text reply, got {other:?}"),
        }
    }

    /// The reply as a list of texts.
    pub fn texts(&self) -> Vec<String> {
        match self {
            Reply::Array(items) => items.iter().map(Reply::text).collect(),
            other => panic!("expected an array reply, got {other:?}"),
        }
    }
}

impl Raw {
    /// Sends one command and reads its reply; a transport failure is an
    /// `Err`, an error reply is `Ok(Reply::Error(..))`.
    pub async fn try_cmd(&self, args: &[&str]) -> std::io::Result<Reply> {
        use tokio::io::AsyncWriteExt;
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        let mut conn = self.conn.lock().await;
        conn.write_all(&request).await?;
        conn.flush().await?;
        read_reply(&mut *conn).await
    }

    /// Sends one command and panics, naming it, unless Redis answers
    /// without an error.
    pub async fn cmd(&self, args: &[&str]) -> Reply {
        match self.try_cmd(args).await {
            Ok(Reply::Error(e)) => panic!("{args:?}: redis answered {e}"),
            Ok(reply) => reply,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }
}

/// Reads one RESP2 reply.
fn read_reply<'a, R>(
    conn: &'a mut R,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Reply>> + Send + 'a>>
where
    R: tokio::io::AsyncBufRead + Unpin + Send,
{
    Box::pin(async move {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(line.len().min(1));
        let number = || rest.parse::<i64>().map_err(|_| bad(line));
        Ok(match kind {
            "+" => Reply::Status(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(number()?),
            "$" => match usize::try_from(number()?) {
                Err(_) => Reply::Bulk(None),
                Ok(len) => {
                    let mut body = vec![0; len + 2];
                    conn.read_exact(&mut body).await?;
                    body.truncate(len);
                    Reply::Bulk(Some(body))
                }
            },
            "*" => match usize::try_from(number()?) {
                Err(_) => Reply::Array(Vec::new()),
                Ok(len) => {
                    let mut items = Vec::with_capacity(len);
                    for _ in 0..len {
                        items.push(read_reply(conn).await?);
                    }
                    Reply::Array(items)
                }
            },
            _ => return Err(bad(line)),
        })
    })
}

/// Lets no new connection in to `server` (its current clients stay):
/// `maxclients` set to the number connected now. A new push subscription
/// is refused until [`admit_clients`] runs.
pub async fn refuse_new_clients(conn: &mut Raw) {
    let info = conn.cmd(&["INFO", "clients"]).await.text();
    let connected: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("connected_clients in INFO");
    conn.cmd(&["CONFIG", "SET", "maxclients", &connected.to_string()])
        .await;
}

/// Undoes [`refuse_new_clients`].
pub async fn admit_clients(conn: &mut Raw) {
    conn.cmd(&["CONFIG", "SET", "maxclients", "10000"]).await;
}

/// Whether `err` is a Redis node's quarantine refusal.
pub fn is_quarantine(err: &Error) -> bool {
    err.to_string().contains("refusing new grants")
}

fn probe_args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis_support".into(),
        quorum: 1,
    }
}

/// Locks a scratch name until the server's quarantine is over; at most
/// 12 s (the quarantine is counted from the start rounded up to a second).
pub async fn wait_out_quarantine(redis: &Arc<dyn NetLocker>) {
    wait_out_quarantine_keeping(redis, None).await
}

/// As [`wait_out_quarantine`], refreshing `keep` (uid, name) all along as
/// its holder would: a quarantine is at least the validity, so an entry
/// re-created at its start would expire before its end otherwise.
pub async fn wait_out_quarantine_keeping(redis: &Arc<dyn NetLocker>, keep: Option<(&str, &str)>) {
    let give_up = Instant::now() + Duration::from_secs(12);
    loop {
        if let Some((uid, name)) = keep {
            let _ = redis
                .refresh_mode(&probe_args(uid, name), LockMode::Write)
                .await;
        }
        match redis.lock(&probe_args("probe", "scratch")).await {
            Ok(true) => {
                let unlocked = redis.unlock(&probe_args("probe", "scratch")).await;
                assert!(matches!(unlocked, Ok(true)), "{unlocked:?}");
                return;
            }
            Err(err) if is_quarantine(&err) && Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("the quarantine did not end as expected: {other:?}"),
        }
    }
}
