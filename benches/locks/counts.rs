//! `--counts on`: what the kernel sees of one TCP row, per lock. System
//! calls of the client (this process) and of the server processes, counted
//! by `perf stat` on their tracepoints while the measured window is open
//! (perf starts with its counters disabled and is told to enable and
//! disable them through a control FIFO at the window's edges), and
//! context switches of both sides, voluntary and not, summed over every
//! thread from `/proc/PID/task/*/status` at the same edges.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use crate::context::Context;

/// The tracepoints counted, with the name each is reported under.
const EVENTS: &[(&str, &str)] = &[
    ("raw_syscalls:sys_enter", "all"),
    ("syscalls:sys_enter_write", "write"),
    ("syscalls:sys_enter_writev", "send"),
    ("syscalls:sys_enter_sendto", "send"),
    ("syscalls:sys_enter_sendmsg", "send"),
    ("syscalls:sys_enter_read", "read"),
    ("syscalls:sys_enter_readv", "recv"),
    ("syscalls:sys_enter_recvfrom", "recv"),
    ("syscalls:sys_enter_recvmsg", "recv"),
    ("syscalls:sys_enter_epoll_wait", "epoll"),
    ("syscalls:sys_enter_epoll_pwait", "epoll"),
    ("syscalls:sys_enter_futex", "futex"),
];

/// Counts of one side (client or servers) over the window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Side {
    pub syscalls: u64,
    /// Socket writes: sendto (what std's `TcpStream::write` calls),
    /// sendmsg, writev.
    pub writes: u64,
    /// Socket reads: recvfrom (std's `TcpStream::read`), recvmsg, readv;
    /// those that found nothing included.
    pub reads: u64,
    /// Plain `write`s: on these processes, the eventfd a tokio runtime
    /// wakes its I/O driver with (and perf's control FIFO, twice).
    pub other_writes: u64,
    /// Plain `read`s: the eventfd drained.
    pub other_reads: u64,
    pub epoll: u64,
    pub futex: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// Both sides, and the frames that crossed between them in the window.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub client: Side,
    pub servers: Side,
    /// Request frames the client sent (= frames the servers read).
    pub requests: u64,
    /// Frames the servers sent (replies and pushes) (= frames the client
    /// read).
    pub replies: u64,
}

impl Counts {
    /// Frames per socket write and read of each side, under their JSON
    /// names, in the order the line prints them; none without a call.
    fn frame_ratios(&self) -> [(&'static str, Option<f64>); 4] {
        let r = |key, a, b: u64| (key, (b != 0).then(|| a as f64 / b as f64));
        [
            r("client_frames_per_write", self.requests, self.client.writes),
            r("server_frames_per_write", self.replies, self.servers.writes),
            r("client_frames_per_read", self.replies, self.client.reads),
            r("server_frames_per_read", self.requests, self.servers.reads),
        ]
    }

    /// The columns `--counts on` prints under a row, per lock.
    pub fn line(&self, locks: u64) -> String {
        let per = |x: u64| x as f64 / locks.max(1) as f64;
        let [w_client, w_servers, r_client, r_servers] =
            self.frame_ratios().map(|(_, r)| crate::out::per(r));
        let side = |s: &Side| {
            format!(
                "{:.2} syscalls ({:.2} send, {:.2} recv, {:.2}/{:.2} write/read, {:.2} epoll, {:.2} futex), \
                 {:.2}+{:.2} ctx sw",
                per(s.syscalls),
                per(s.writes),
                per(s.reads),
                per(s.other_writes),
                per(s.other_reads),
                per(s.epoll),
                per(s.futex),
                per(s.voluntary),
                per(s.involuntary),
            )
        };
        format!(
            "      counts per lock: client {} (vol+invol); servers {}; frames {:.2} out + {:.2} in; \
             frames/write client {} servers {}; frames/read client {} servers {}",
            side(&self.client),
            side(&self.servers),
            per(self.requests),
            per(self.replies),
            w_client,
            w_servers,
            r_client,
            r_servers,
        )
    }

    /// The same, as a JSON object of per-lock figures.
    pub fn json(&self, locks: u64) -> String {
        use crate::out::Obj;
        let per = |x: u64| x as f64 / locks.max(1) as f64;
        let side = |s: &Side| {
            Obj::new()
                .num("syscalls", per(s.syscalls))
                .num("socket_writes", per(s.writes))
                .num("socket_reads", per(s.reads))
                .num("other_writes", per(s.other_writes))
                .num("other_reads", per(s.other_reads))
                .num("epoll", per(s.epoll))
                .num("futex", per(s.futex))
                .num("voluntary_ctx", per(s.voluntary))
                .num("involuntary_ctx", per(s.involuntary))
        };
        let o = Obj::new()
            .raw("per_lock", true)
            .raw("client", side(&self.client))
            .raw("servers", side(&self.servers))
            .num("requests", per(self.requests))
            .num("replies", per(self.replies));
        let ratios = self.frame_ratios().into_iter();
        ratios.fold(o, |o, (key, r)| o.opt(key, r)).done()
    }
}

/// Context switches of every thread of `pid`, voluntary and not.
fn ctx_switches(pid: u32) -> (u64, u64) {
    let mut sum = (0, 0);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return sum;
    };
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            let value = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(v) = value("voluntary_ctxt_switches:") {
                sum.0 += v;
            } else if let Some(v) = value("nonvoluntary_ctxt_switches:") {
                sum.1 += v;
            }
        }
    }
    sum
}

fn ctx_of(pids: &[u32]) -> (u64, u64) {
    pids.iter()
        .map(|&p| ctx_switches(p))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// One `perf stat` on a set of processes, its counters enabled and
/// disabled through a control FIFO.
struct Perf {
    child: Child,
    ctl: File,
    ack: BufReader<File>,
    out: PathBuf,
}

impl Perf {
    fn start(dir: &Path, name: &str, pids: &[u32]) -> Result<Perf, String> {
        let ctl_path = dir.join(format!("{name}.ctl"));
        let ack_path = dir.join(format!("{name}.ack"));
        for fifo in [&ctl_path, &ack_path] {
            let c =
                std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).context("fifo path")?;
            // SAFETY: a valid NUL-terminated path; mkfifo only creates it.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                return Err(format!(
                    "cannot make {}: {}",
                    fifo.display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        let out = dir.join(format!("{name}.csv"));
        let mut command = Command::new(perf_binary());
        command
            .args(["stat", "-x,", "--no-big-num", "-D", "-1", "--control"])
            .arg(format!(
                "fifo:{},{}",
                ctl_path.display(),
                ack_path.display()
            ))
            .arg("-o")
            .arg(&out);
        for (event, _) in EVENTS {
            command.args(["-e", event]);
        }
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        command.args(["-p", &pids.join(",")]);
        let log_path = dir.join(format!("{name}.log"));
        let log = File::create(&log_path)
            .map_err(|e| format!("cannot make {}: {e}", log_path.display()))?;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start perf (--counts on needs perf)")?;
        // Opened without blocking, so that a perf that failed before it
        // opened its end is reported instead of waited for.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let ctl = loop {
            match open_nonblocking(&ctl_path, true) {
                Ok(file) => break file,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
                Err(e) => return Err(format!("cannot open {}: {e}", ctl_path.display())),
            }
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!(
                    "perf did not start counting ({}): {}",
                    exited.map_or("no answer in 10 s".to_owned(), |s| s.to_string()),
                    log.trim()
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        blocking(&ctl)?;
        let ack = open_nonblocking(&ack_path, false)
            .map_err(|e| format!("cannot open {}: {e}", ack_path.display()))?;
        blocking(&ack)?;
        let ack = BufReader::new(ack);
        Ok(Perf {
            child,
            ctl,
            ack,
            out,
        })
    }

    fn command(&mut self, what: &str) -> Result<(), String> {
        writeln!(self.ctl, "{what}").context("perf control")?;
        let mut line = String::new();
        self.ack.read_line(&mut line).context("perf ack")?;
        Ok(())
    }

    /// Stops perf and reads its counts, summed by reported name.
    fn finish(mut self) -> Result<Side, String> {
        // SAFETY: our own child, not yet reaped, so the PID is still its.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out)
            .map_err(|e| format!("cannot read {}: {e}", self.out.display()))?;
        let mut side = Side::default();
        for line in text.lines() {
            let fields: Vec<&str> = line.split(',').collect();
            let (Some(value), Some(event)) = (fields.first(), fields.get(2)) else {
                continue;
            };
            let Ok(value) = value.parse::<u64>() else {
                continue;
            };
            match EVENTS.iter().find(|(e, _)| e == event).map(|(_, n)| *n) {
                Some("all") => side.syscalls += value,
                Some("send") => side.writes += value,
                Some("recv") => side.reads += value,
                Some("write") => side.other_writes += value,
                Some("read") => side.other_reads += value,
                Some("epoll") => side.epoll += value,
                Some("futex") => side.futex += value,
                _ => {}
            }
        }
        Ok(side)
    }
}

/// A FIFO opened for writing or for reading without waiting for the
/// other end (`ENXIO` for a writer while there is no reader).
fn open_nonblocking(path: &Path, write: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(write).read(!write);
    options.custom_flags(libc::O_NONBLOCK).open(path)
}

/// Clears `O_NONBLOCK` on a FIFO opened with it.
fn blocking(file: &File) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this process owns, reading and setting
    // its status flags only.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cannot make a FIFO blocking: {}",
            std::io::Error::last_os_error()
        ))
    }
}

fn perf_binary() -> PathBuf {
    std::env::var_os("PERF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("perf"))
}

struct State {
    client: Perf,
    servers: Perf,
    /// Context switches when the window opened.
    opened: Option<((u64, u64), (u64, u64))>,
    /// Context switches over the window.
    measured: Option<((u64, u64), (u64, u64))>,
}

/// Counts one run: [`mark`](Probe::mark) when the window opens and when it
/// closes, then [`finish`](Probe::finish).
pub struct Probe {
    dir: PathBuf,
    client_pid: u32,
    server_pids: Vec<u32>,
    state: Mutex<Option<State>>,
}

impl Probe {
    pub fn start(server_pids: Vec<u32>) -> Result<Probe, String> {
        static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("quorum-lock-counts-{}-{run}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let client_pid = std::process::id();
        let client = Perf::start(&dir, "client", &[client_pid])?;
        let servers = Perf::start(&dir, "servers", &server_pids)?;
        Ok(Probe {
            dir,
            client_pid,
            server_pids,
            state: Mutex::new(Some(State {
                client,
                servers,
                opened: None,
                measured: None,
            })),
        })
    }

    /// Opens the window the first time, closes it the second.
    pub fn mark(&self) {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(state) = guard.as_mut() else {
            return;
        };
        let ctx = (ctx_of(&[self.client_pid]), ctx_of(&self.server_pids));
        let result = if state.opened.is_none() {
            state.opened = Some(ctx);
            state
                .client
                .command("enable")
                .and_then(|()| state.servers.command("enable"))
        } else if state.measured.is_none() {
            let (c0, s0) = state.opened.unwrap_or_default();
            let result = state
                .client
                .command("disable")
                .and_then(|()| state.servers.command("disable"));
            state.measured = Some((
                (ctx.0 .0 - c0.0, ctx.0 .1 - c0.1),
                (ctx.1 .0.saturating_sub(s0.0), ctx.1 .1.saturating_sub(s0.1)),
            ));
            result
        } else {
            Ok(())
        };
        if let Err(err) = result {
            eprintln!("locks: warning: --counts: {err}");
        }
    }

    /// The counts of the window, with the frames that crossed in it.
    pub fn finish(self, requests: u64, replies: u64) -> Result<Counts, String> {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or("counted twice")?;
        let mut client = state.client.finish()?;
        let mut servers = state.servers.finish()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        let ((cv, ci), (sv, si)) = state.measured.ok_or("the window never closed")?;
        client.voluntary = cv;
        client.involuntary = ci;
        servers.voluntary = sv;
        servers.involuntary = si;
        Ok(Counts {
            client,
            servers,
            requests,
            replies,
        })
    }
}
