//! PostgreSQL and MariaDB servers for the tests (and the benchmark harness)
//! that need real SQL databases: each in a temporary directory of its own,
//! on a free loopback port, with a `quorum` database, stopped by its PID and
//! removed when dropped.
//!
//! Without the server's programs, [`PgServer::start`] and
//! [`MariaServer::start`] print that the test was skipped and return
//! `None`, unless `QUORUM_LOCK_REQUIRE_SQL` is set (as `.ci/run` does),
//! which makes a missing server a failure.
//!
//! Only the standard library and `libc` are used, so that the benchmark
//! package can include this file as it is: readiness and statements go
//! through the servers' own client programs (`pg_isready`, `psql`,
//! `mariadb-admin`, `mariadb`), not a Rust SQL client.
//!
//! Each server leads a process group of its own, and a kill, a pause or a
//! resume signals the whole group: PostgreSQL serves each connection from
//! a process of its own, which a signal to the postmaster alone would leave
//! running (answering on its connection, holding the shared memory that a
//! restarted postmaster refuses to share). The price: a test process that
//! dies without unwinding (SIGKILL, or Ctrl-C, which reaches the terminal's
//! group only) leaves its servers running. They are found by their
//! directories, `quorum-lock-pg-<test PID>-<n>` and
//! `quorum-lock-maria-<test PID>-<n>` under the temporary directory, whose
//! `data/postmaster.pid` and `mariadbd.pid` name them.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long a server may take to accept connections after it is spawned,
/// crash recovery included.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long a clean shutdown may take before the server is killed.
const STOP_WITHIN: Duration = Duration::from_secs(30);
/// How long one run of a client program (or `initdb`) may take.
const TOOL_WITHIN: Duration = Duration::from_secs(60);
/// Between two polls of a starting or stopping server.
const POLL: Duration = Duration::from_millis(50);

/// The password of the `quorum` MariaDB user that [`MariaServer::url`] names.
pub const MARIA_PASSWORD: &str = "quorum-pass";

// ---------------------------------------------------------------------------
// PostgreSQL

/// A PostgreSQL server of this test, with trust authentication on
/// 127.0.0.1 and a `quorum` database; killed by its PID and its directory
/// removed when dropped.
pub struct PgServer {
    /// The postmaster, leader of its process group; `None` while stopped.
    child: Option<Child>,
    port: u16,
    /// The temporary directory: `data/`, the server's log and its socket.
    root: PathBuf,
    bin: PgBin,
    /// The `postgres` user's uid and gid when this process runs as root:
    /// PostgreSQL refuses to run as root.
    owner: Option<(u32, u32)>,
}

/// Where PostgreSQL's programs are.
#[derive(Clone)]
struct PgBin {
    initdb: PathBuf,
    postgres: PathBuf,
    psql: PathBuf,
    pg_isready: PathBuf,
}

impl PgServer {
    /// A server on a free port with an empty `quorum` database; `None` (and
    /// a note on stderr) when PostgreSQL is not installed and the
    /// environment does not require it.
    pub fn start() -> Option<PgServer> {
        let found = PgBin::find().and_then(|bin| Ok((bin, pg_owner()?)));
        let (bin, owner) = match found {
            Ok(found) => found,
            Err(why) => return not_available("PostgreSQL", &why),
        };
        let root = temp_root("pg");
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))
                .expect("give the data directory to the postgres user");
        }
        let mut server = PgServer {
            child: None,
            port: free_port(),
            root,
            bin,
            owner,
        };
        let template = {
            static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
            TEMPLATE.get_or_init(|| {
                // A server that is never started: only its data directory
                // is made, kept until the process exits.
                let maker = std::mem::ManuallyDrop::new(PgServer {
                    child: None,
                    port: 0,
                    root: template_root("pg", server.owner),
                    bin: server.bin.clone(),
                    owner: server.owner,
                });
                maker.initdb();
                maker.data_dir()
            })
        };
        copy_data_dir(template, &server.data_dir());
        server.boot(false);
        server.psql_in("postgres", "CREATE DATABASE quorum");
        Some(server)
    }

    /// `postgres://postgres@127.0.0.1:port/quorum`: the superuser, which
    /// trust authentication lets in without a password.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/quorum", self.port)
    }

    /// The URL of the `quorum` database for another role (one a test made
    /// with [`psql`](Self::psql)). The server trusts every local
    /// connection, so the password is carried but not checked. Neither part
    /// is percent-encoded.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!(
            "postgres://{user}:{password}@127.0.0.1:{}/quorum",
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (`initdb`'s).
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The server's log, which its backends write to as they go.
    pub fn log_path(&self) -> PathBuf {
        self.root.join("server.log")
    }

    /// The PID of the running postmaster.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Kills the server (the postmaster and every backend) with SIGKILL
    /// and reaps the postmaster. No-op when it is not running.
    pub fn kill(&mut self) {
        let running = self.child.is_some();
        kill_group(&mut self.child);
        if running {
            remove_shared_memory(&self.data_dir());
        }
    }

    /// A crash restart: kills the server with SIGKILL and starts it again
    /// on the same port and data directory, then waits until it has
    /// recovered and accepts connections. What was committed is there.
    /// Also starts a server that was killed or stopped.
    pub fn restart(&mut self) {
        self.kill();
        self.boot(true);
    }

    /// Stops the server with a fast shutdown (SIGINT: transactions rolled
    /// back, a checkpoint written) and waits until it has exited.
    pub fn stop_fast(&mut self) {
        stop_group(&mut self.child, libc::SIGINT, "postgres");
    }

    /// A clean restart: [`stop_fast`](Self::stop_fast), then a start on the
    /// same port and data directory.
    pub fn restart_clean(&mut self) {
        self.stop_fast();
        self.boot(true);
    }

    /// Freezes the server with SIGSTOP: its port stays open, nothing
    /// answers, connections already made included. Returns once every
    /// process of the server has stopped (where /proc tells).
    pub fn pause(&self) {
        pause_group(self.pid());
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        signal_group(self.pid(), libc::SIGCONT);
    }

    /// Runs `sql` (one or more statements) in the `quorum` database as the
    /// superuser and returns what `psql` printed: one line per row, the
    /// columns separated by tabs, no headers and no command tags. Panics,
    /// with psql's message, when a statement fails.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in("quorum", sql)
    }

    /// [`psql`](Self::psql), with psql's message as the error when a
    /// statement fails (it stops at the first).
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        self.try_psql_in("quorum", sql)
    }

    fn psql_in(&self, database: &str, sql: &str) -> String {
        self.try_psql_in(database, sql)
            .unwrap_or_else(|e| panic!("psql on port {}: {sql:?}: {e}", self.port))
    }

    fn try_psql_in(&self, database: &str, sql: &str) -> Result<String, String> {
        let mut psql = Command::new(&self.bin.psql);
        // -X: no ~/.psqlrc; -A -t -F tab: bare rows; -q: no command tags.
        psql.args(["-X", "-A", "-t", "-q", "-F", "\t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", database, "-f", "-"]);
        pg_client_env(&mut psql);
        run_tool(&mut psql, Some(sql), TOOL_WITHIN)
    }

    /// A `psql` session of its own in the `quorum` database, kept open
    /// until dropped: a transaction begun in it stays open between calls,
    /// as a slow client's would.
    pub fn session(&self) -> PsqlSession {
        let mut psql = Command::new(&self.bin.psql);
        psql.args(["-X", "-A", "-t", "-q", "-F", "\t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "quorum"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        pg_client_env(&mut psql);
        let mut child = psql.spawn().expect("psql starts");
        let stdin = child.stdin.take().expect("psql's stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("psql's stdout"));
        PsqlSession {
            child,
            stdin,
            stdout,
        }
    }

    /// Makes the data directory with `initdb`, as the `postgres` user when
    /// this process is root.
    fn initdb(&self) {
        let mut initdb = Command::new(&self.bin.initdb);
        initdb
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"])
            // The test's durability is the server's (fsync on); initdb's
            // own final sync would only slow every start down.
            .arg("--no-sync");
        self.as_owner(&mut initdb);
        if let Err(e) = run_tool(&mut initdb, None, TOOL_WITHIN) {
            panic!(
                "initdb in {} failed (the postgres user must be able to reach the \
                 temporary directory): {e}",
                self.root.display()
            );
        }
    }

    /// Runs `command` as the `postgres` user when this process is root,
    /// from the server's own directory (PostgreSQL's programs stop when
    /// they cannot read their working directory).
    fn as_owner(&self, command: &mut Command) {
        command.current_dir(&self.root);
        if let Some((uid, gid)) = self.owner {
            // The child itself becomes postgres (no runuser in between),
            // so the PID kept is the postmaster's.
            command.uid(uid).gid(gid);
        }
    }

    /// Spawns the postmaster and waits until it accepts connections. With
    /// `retry`, a postmaster that exits at once is spawned again until
    /// [`READY_WITHIN`]: after a kill, the old backends may still hold the
    /// shared memory for a moment.
    fn boot(&mut self, retry: bool) {
        let give_up = Instant::now() + READY_WITHIN;
        loop {
            let port = self.port.to_string();
            let socket_dir = format!("unix_socket_directories={}", self.root.display());
            let mut postgres = Command::new(&self.bin.postgres);
            postgres
                .arg("-D")
                .arg(self.data_dir())
                .args(["-p", &port, "-c", "listen_addresses=127.0.0.1"])
                .args(["-c", &socket_dir])
                // Durability is what the lockers' tests check: keep it on
                // whatever the data directory's configuration says.
                .args(["-c", "fsync=on", "-c", "synchronous_commit=on"])
                .args(["-c", "full_page_writes=on"])
                // Small, so that many servers fit on a small machine.
                .args(["-c", "shared_buffers=16MB", "-c", "max_connections=100"])
                // Its dynamic shared memory in the data directory, removed
                // with it: the default puts files in /dev/shm that a killed
                // server leaves behind (thousands, gigabytes, over runs).
                .args(["-c", "dynamic_shared_memory_type=mmap"]);
            self.as_owner(&mut postgres);
            let bin = self.bin.clone();
            let started = start_once(
                &mut postgres,
                &mut self.child,
                &self.root,
                &mut self.port,
                retry,
                give_up,
                |port| {
                    let mut ping = Command::new(&bin.pg_isready);
                    ping.args(["-h", "127.0.0.1", "-p", &port.to_string()])
                        .args(["-U", "postgres", "-d", "postgres", "-t", "2"]);
                    pg_client_env(&mut ping);
                    run_tool(&mut ping, None, Duration::from_secs(5)).is_ok()
                },
            );
            match started {
                Ok(true) => return,
                Ok(false) => {}
                Err(failure) => {
                    self.kill();
                    panic!("postgres {failure}");
                }
            }
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl PgBin {
    /// The highest version under `/usr/lib/postgresql/*/bin` (Debian's
    /// layout, where `initdb` is on no PATH), else `initdb` on the PATH
    /// with `postgres` beside it.
    fn find() -> Result<PgBin, String> {
        let mut versions: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let version = name
                    .split('.')
                    .map(|n| n.parse().ok())
                    .collect::<Option<Vec<u32>>>()?;
                let bin = entry.path().join("bin");
                let complete = ["initdb", "postgres"].iter().all(|p| bin.join(p).is_file());
                complete.then_some((version, bin))
            })
            .collect();
        versions.sort();
        let dir = match versions.pop() {
            Some((_, dir)) => dir,
            None => find_program("initdb", &[])
                .and_then(|initdb| Some(initdb.parent()?.to_path_buf()))
                .filter(|dir| dir.join("postgres").is_file())
                .ok_or("no initdb and postgres under /usr/lib/postgresql/*/bin or on the PATH")?,
        };
        // The client programs of the same version when they are there.
        let client = |name: &str| {
            let beside = dir.join(name);
            if beside.is_file() {
                Ok(beside)
            } else {
                find_program(name, &[]).ok_or(format!("no {name} beside {}", dir.display()))
            }
        };
        Ok(PgBin {
            initdb: dir.join("initdb"),
            postgres: dir.join("postgres"),
            psql: client("psql")?,
            pg_isready: client("pg_isready")?,
        })
    }
}

/// The `postgres` user's uid and gid when this process is root; `None`
/// otherwise (the server runs as the current user).
fn pg_owner() -> Result<Option<(u32, u32)>, String> {
    if !is_root() {
        return Ok(None);
    }
    let id = |flag: &str| {
        let out = run_tool(
            Command::new("id").args([flag, "postgres"]),
            None,
            TOOL_WITHIN,
        )
        .map_err(|e| format!("running as root and no postgres user to run it as: {e}"))?;
        out.trim()
            .parse::<u32>()
            .map_err(|e| format!("id {flag} postgres said {out:?}: {e}"))
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

/// Keeps the host's libpq settings that no argument overrides from
/// sending the client programs elsewhere or requiring TLS.
/// An open `psql` session (see [`PgServer::session`]); ended when dropped,
/// which rolls back whatever transaction it left open.
pub struct PsqlSession {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl PsqlSession {
    /// Runs `sql` and returns the rows it printed once psql has run it
    /// (blocking: call it off the runtime's threads or where blocking is
    /// meant). Panics when the session ended, e.g. on an error.
    pub fn exec(&mut self, sql: &str) -> String {
        use std::io::BufRead;
        const DONE: &str = "-- psql session: statement done --";
        writeln!(self.stdin, "{sql}\n\\echo '{DONE}'").expect("psql takes the statement");
        self.stdin.flush().expect("psql takes the statement");
        let mut rows = String::new();
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).expect("psql's output");
            assert!(read > 0, "psql ended while running {sql:?}");
            if line.trim_end() == DONE {
                return rows;
            }
            rows.push_str(&line);
        }
    }
}

impl Drop for PsqlSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pg_client_env(command: &mut Command) {
    for var in [
        "PGOPTIONS",
        "PGSERVICE",
        "PGSSLMODE",
        "PGREQUIRESSL",
        "PGGSSENCMODE",
    ] {
        command.env_remove(var);
    }
    command.env("PGCONNECT_TIMEOUT", "5");
}

// ---------------------------------------------------------------------------
// MariaDB

/// A MariaDB server of this test, with a `quorum` database and a `quorum`
/// user (password [`MARIA_PASSWORD`]) allowed everything on it from
/// 127.0.0.1; killed by its PID and its directory removed when dropped.
pub struct MariaServer {
    /// `mariadbd`, leader of its process group; `None` while stopped.
    child: Option<Child>,
    port: u16,
    /// The temporary directory: `data/`, the server's log and its socket.
    root: PathBuf,
    bin: MariaBin,
}

/// Where MariaDB's programs are.
#[derive(Clone)]
struct MariaBin {
    install_db: PathBuf,
    mariadbd: PathBuf,
    client: PathBuf,
    admin: PathBuf,
}

impl MariaServer {
    /// A server on a free port with an empty `quorum` database and the
    /// `quorum` user; `None` (and a note on stderr) when MariaDB is not
    /// installed and the environment does not require it.
    pub fn start() -> Option<MariaServer> {
        let bin = match MariaBin::find() {
            Ok(bin) => bin,
            Err(why) => return not_available("MariaDB", &why),
        };
        let mut server = MariaServer {
            child: None,
            port: free_port(),
            root: temp_root("maria"),
            bin,
        };
        let template = {
            static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
            TEMPLATE.get_or_init(|| {
                let maker = std::mem::ManuallyDrop::new(MariaServer {
                    child: None,
                    port: 0,
                    root: template_root("maria", None),
                    bin: server.bin.clone(),
                });
                maker.install_db();
                maker.data_dir()
            })
        };
        copy_data_dir(template, &server.data_dir());
        server.boot(false);
        // Through the socket as root, which has no password; the lockers
        // connect over TCP with a password, so credentials are checked.
        server.sql_in(
            None,
            &format!(
                "CREATE DATABASE quorum;\n\
                 CREATE USER 'quorum'@'127.0.0.1' IDENTIFIED BY '{MARIA_PASSWORD}';\n\
                 GRANT ALL ON quorum.* TO 'quorum'@'127.0.0.1';"
            ),
        );
        Some(server)
    }

    /// `mysql://quorum:quorum-pass@127.0.0.1:port/quorum`.
    pub fn url(&self) -> String {
        self.url_as("quorum", MARIA_PASSWORD)
    }

    /// The URL of the `quorum` database for another user, one a test made
    /// with [`sql`](Self::sql) as `'name'@'127.0.0.1'` (the server resolves
    /// no host names, so that is the host of every TCP client). Neither
    /// part is percent-encoded.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!("mysql://{user}:{password}@127.0.0.1:{}/quorum", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (`mariadb-install-db`'s).
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The PID of the running `mariadbd`.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// Kills the server with SIGKILL and reaps it. No-op when it is not
    /// running.
    pub fn kill(&mut self) {
        kill_group(&mut self.child);
    }

    /// A crash restart: kills the server with SIGKILL and starts it again
    /// on the same port and data directory, then waits until InnoDB has
    /// recovered and the server accepts connections. What was committed is
    /// there. Also starts a server that was killed or stopped.
    pub fn restart(&mut self) {
        self.kill();
        self.boot(true);
    }

    /// Stops the server with a normal shutdown (SIGTERM, what `mariadbd`
    /// takes for one) and waits until it has exited.
    pub fn stop_fast(&mut self) {
        stop_group(&mut self.child, libc::SIGTERM, "mariadbd");
    }

    /// A clean restart: [`stop_fast`](Self::stop_fast), then a start on the
    /// same port and data directory.
    pub fn restart_clean(&mut self) {
        self.stop_fast();
        self.boot(true);
    }

    /// Freezes the server with SIGSTOP: its port stays open, nothing
    /// answers. Returns once every thread has stopped (where /proc tells).
    pub fn pause(&self) {
        pause_group(self.pid());
    }

    /// Thaws a server frozen by [`pause`](Self::pause).
    pub fn resume(&self) {
        signal_group(self.pid(), libc::SIGCONT);
    }

    /// Runs `sql` (one or more statements, each ended by `;`) in the
    /// `quorum` database as root and returns what the `mariadb` client
    /// printed: one line per row, the columns separated by tabs, no
    /// headers. Panics, with the client's message, when a statement fails.
    pub fn sql(&self, sql: &str) -> String {
        self.sql_in(Some("quorum"), sql)
    }

    /// [`sql`](Self::sql), with the client's message as the error when a
    /// statement fails (it stops at the first).
    pub fn try_sql(&self, sql: &str) -> Result<String, String> {
        self.try_sql_in(Some("quorum"), sql)
    }

    fn sql_in(&self, database: Option<&str>, sql: &str) -> String {
        self.try_sql_in(database, sql)
            .unwrap_or_else(|e| panic!("mariadb on port {}: {sql:?}: {e}", self.port))
    }

    fn try_sql_in(&self, database: Option<&str>, sql: &str) -> Result<String, String> {
        let mut client = Command::new(&self.bin.client);
        // --no-defaults first: the host's my.cnf must not change the target.
        client
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args([
                "-uroot",
                "--batch",
                "--skip-column-names",
                "--connect-timeout=5",
            ]);
        client.args(database);
        run_tool(&mut client, Some(sql), TOOL_WITHIN)
    }

    fn socket(&self) -> PathBuf {
        self.root.join("sock")
    }

    /// A temporary directory of this server's own: with /tmp shared by
    /// servers starting side by side, `mariadb-install-db` failed now and
    /// then ("Could not remove temporary table", then "Unknown table
    /// 'mysql.tmp_user_sys'").
    fn tmpdir_arg(&self) -> String {
        let tmp = self.root.join("tmp");
        std::fs::create_dir_all(&tmp).expect("a temporary directory for mariadbd");
        format!("--tmpdir={}", tmp.display())
    }

    /// Makes the data directory with `mariadb-install-db`: a root user
    /// with no password (`normal`), which the socket lets in whoever this
    /// process runs as.
    fn install_db(&self) {
        let mut install = Command::new(&self.bin.install_db);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(["--skip-name-resolve", "--innodb-log-file-size=16M"])
            .arg(self.tmpdir_arg())
            .current_dir(&self.root);
        if is_root() {
            // mariadbd refuses to run as root unless told to.
            install.arg("--user=root");
        }
        if let Err(e) = run_tool(&mut install, None, TOOL_WITHIN) {
            panic!("mariadb-install-db in {} failed: {e}", self.root.display());
        }
    }

    /// Spawns `mariadbd` and waits until it accepts connections; with
    /// `retry`, one that exits at once is spawned again until
    /// [`READY_WITHIN`] (see [`PgServer::boot`]).
    fn boot(&mut self, retry: bool) {
        let give_up = Instant::now() + READY_WITHIN;
        loop {
            let mut mariadbd = Command::new(&self.bin.mariadbd);
            // --no-defaults first: the system's my.cnf is not read.
            mariadbd
                .arg("--no-defaults")
                .arg(format!("--datadir={}", self.data_dir().display()))
                .arg(format!("--socket={}", self.socket().display()))
                .arg(format!(
                    "--pid-file={}",
                    self.root.join("mariadbd.pid").display()
                ))
                .arg(format!("--port={}", self.port))
                .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
                // Small and quick to start; innodb_flush_log_at_trx_commit
                // stays at its default (1): a commit is on disk.
                .args(["--skip-log-bin", "--innodb-buffer-pool-size=32M"])
                .args(["--innodb-log-file-size=16M", "--performance-schema=OFF"])
                .arg(self.tmpdir_arg())
                .current_dir(&self.root);
            if is_root() {
                mariadbd.arg("--user=root");
            }
            let admin = self.bin.admin.clone();
            let socket = self.socket();
            let started = start_once(
                &mut mariadbd,
                &mut self.child,
                &self.root,
                &mut self.port,
                retry,
                give_up,
                |_| {
                    let mut ping = Command::new(&admin);
                    ping.arg("--no-defaults")
                        .arg(format!("--socket={}", socket.display()))
                        .args(["-uroot", "--connect-timeout=2", "ping"]);
                    run_tool(&mut ping, None, Duration::from_secs(5)).is_ok()
                },
            );
            match started {
                Ok(true) => return,
                Ok(false) => {}
                Err(failure) => {
                    self.kill();
                    panic!("mariadbd {failure}");
                }
            }
        }
    }
}

impl Drop for MariaServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl MariaBin {
    /// `mariadbd` is in an sbin directory, which a non-root PATH often
    /// lacks; the others are on the PATH.
    fn find() -> Result<MariaBin, String> {
        let sbin: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/usr/libexec"];
        let bin: &[&str] = &["/usr/bin", "/usr/local/bin"];
        let find = |name: &str, dirs: &[&str]| {
            find_program(name, dirs).ok_or(format!("no {name} on the PATH or in {dirs:?}"))
        };
        Ok(MariaBin {
            mariadbd: find("mariadbd", sbin)?,
            install_db: find("mariadb-install-db", bin)?,
            client: find("mariadb", bin)?,
            admin: find("mariadb-admin", bin)?,
        })
    }
}

// ---------------------------------------------------------------------------
// Shared by both

/// The note (or, when `QUORUM_LOCK_REQUIRE_SQL` is set, the panic) for a
/// server whose programs are missing.
fn not_available<T>(what: &str, why: &str) -> Option<T> {
    if std::env::var_os("QUORUM_LOCK_REQUIRE_SQL").is_some() {
        panic!("QUORUM_LOCK_REQUIRE_SQL is set but {what} cannot start: {why}");
    }
    eprintln!("skipped: {what} is not available ({why}); install it to run this test");
    None
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the server's log says its port was taken.
fn port_taken(root: &Path) -> bool {
    log_tail(root).contains("Address already in use")
}

/// A free loopback port below the ephemeral range: `restart` starts the
/// server again on it.
fn free_port() -> u16 {
    crate::ports::restartable_port()
}

/// The directory of a data-directory template: `initdb` and
/// `mariadb-install-db` take about a second each and a copy a tenth of
/// that, so each test process makes one data directory per kind and copies
/// it for every server. Removed when the process exits.
fn template_root(kind: &str, owner: Option<(u32, u32)>) -> PathBuf {
    static TEMPLATES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    extern "C" fn remove_templates() {
        let dirs = TEMPLATES.lock().unwrap_or_else(PoisonError::into_inner);
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let root = temp_root(&format!("{kind}-template"));
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&root, Some(uid), Some(gid))
            .expect("give the template's directory to the postgres user");
    }
    let mut dirs = TEMPLATES.lock().unwrap_or_else(PoisonError::into_inner);
    if dirs.is_empty() {
        // SAFETY: registers a plain function with no arguments, which
        // `exit` calls once; it only removes directories.
        unsafe { libc::atexit(remove_templates) };
    }
    dirs.push(root.clone());
    root
}

/// Copies a template's data directory to `to`, with owners and modes
/// (PostgreSQL wants its directory owned by its user, mode 0700).
fn copy_data_dir(template: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(to)
        .output()
        .unwrap_or_else(|e| panic!("cp: {e}"));
    assert!(
        out.status.success(),
        "copying the data directory {} to {}: {}",
        template.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new, empty directory in the [scratch space](scratch_space), named
/// after `kind`, this process and a counter.
fn temp_root(kind: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = scratch_space().join(format!("quorum-lock-{kind}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory for the server");
    dir
}

/// Where the servers' directories go: `/dev/shm` (memory) where this
/// system has it, else the temporary directory. A commit then waits on
/// no disk that builds beside the tests keep busy (CI saw a locker's first
/// calls on a server just started take over 2 s there). What the tests
/// check of durability still holds: they kill and restart the servers,
/// never the machine, and what a server wrote before it was killed stays
/// in memory as it would in the page cache.
fn scratch_space() -> PathBuf {
    static SPACE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SPACE
        .get_or_init(|| {
            let shm = Path::new("/dev/shm");
            let probe = shm.join(format!("quorum-lock-probe-{}", std::process::id()));
            let usable = std::fs::create_dir_all(&probe).is_ok();
            let _ = std::fs::remove_dir(&probe);
            if usable {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        })
        .clone()
}

/// `name` on the PATH, else in one of `dirs`.
fn find_program(name: &str, dirs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(dirs.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The server's log, `server.log` in its directory, appended to across
/// restarts.
fn log_file(root: &Path) -> File {
    File::options()
        .create(true)
        .append(true)
        .open(root.join("server.log"))
        .expect("open the server's log")
}

/// The last lines of the server's log, for a failure message.
fn log_tail(root: &Path) -> String {
    let log = std::fs::read_to_string(root.join("server.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let from = lines.len().saturating_sub(20);
    format!("the server's log ends with:\n{}", lines[from..].join("\n"))
}

/// Spawns `command` as the leader of a new process group, its output to
/// `log`.
fn spawn_group(command: &mut Command, log: File) -> std::io::Result<Child> {
    let err = log.try_clone()?;
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
}

/// Why a server did not become ready.
#[derive(Debug)]
enum NotReady {
    /// It exited before accepting connections.
    Exited(ExitStatus),
    /// It was still not accepting connections at the deadline.
    TimedOut,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::Exited(status) => write!(f, "it exited ({status})"),
            NotReady::TimedOut => write!(f, "not ready within {READY_WITHIN:?}"),
        }
    }
}

/// Polls until the port takes a TCP connection and `ping` (the server's
/// own client) says it is up, the server exits, or `give_up` passes.
fn wait_ready(
    child: &mut Option<Child>,
    port: u16,
    give_up: Instant,
    mut ping: impl FnMut() -> bool,
) -> Result<(), NotReady> {
    loop {
        let running = child.as_mut().expect("a server was spawned");
        if let Ok(Some(status)) = running.try_wait() {
            // Reaped: forget it, so that nothing signals its PID again.
            *child = None;
            return Err(NotReady::Exited(status));
        }
        // The cheap check first: a listening port before a client run.
        let listening =
            TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), Duration::from_secs(1))
                .is_ok();
        if listening && ping() {
            return Ok(());
        }
        if Instant::now() >= give_up {
            return Err(NotReady::TimedOut);
        }
        std::thread::sleep(POLL);
    }
}

/// One start of a server's `boot`: spawns `command` (its output to the
/// log under `root`), waits until `ping` (given the port) says it is up,
/// and says what comes next: `Ok(true)` ready, `Ok(false)` start again
/// (with `retry`, a server that exited at once, after a pause; on a first
/// start, one whose port another test's server took, on a new port), or
/// `Err` with why it failed, for the caller to stop the server and panic.
fn start_once(
    command: &mut Command,
    child: &mut Option<Child>,
    root: &Path,
    port: &mut u16,
    retry: bool,
    give_up: Instant,
    mut ping: impl FnMut(u16) -> bool,
) -> Result<bool, String> {
    let program = PathBuf::from(command.get_program());
    let spawned = spawn_group(command, log_file(root))
        .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", program.display()));
    *child = Some(spawned);
    let at = *port;
    match wait_ready(child, at, give_up, || ping(at)) {
        Ok(()) => Ok(true),
        Err(NotReady::Exited(_)) if retry && Instant::now() < give_up => {
            std::thread::sleep(Duration::from_millis(100));
            Ok(false)
        }
        // A free port is only free until someone binds it: another
        // test's server took it between free_port() and this one.
        // On a first start, another port will do.
        Err(NotReady::Exited(_)) if !retry && port_taken(root) && Instant::now() < give_up => {
            *port = free_port();
            Ok(false)
        }
        Err(why) => Err(format!(
            "on port {at} did not accept connections: {why}\n{}",
            log_tail(root)
        )),
    }
}

/// Sends `sig` to the process group that `pid` leads. Only called while
/// the leader is not yet reaped, so that the group is surely ours.
///
/// PostgreSQL's backends leave the postmaster's group (each calls
/// `setsid`), so the direct children of `pid` are signalled one by one
/// too: a backend serving a connection made before a pause would
/// otherwise go on answering.
fn signal_group(pid: u32, sig: libc::c_int) {
    let leader = libc::pid_t::try_from(pid).expect("a PID fits pid_t");
    // SAFETY: kill(2) on the process group of a child this process started
    // and has not reaped, and on that child's own children.
    unsafe {
        libc::kill(-leader, sig);
    }
    for child in children(pid) {
        if let Ok(child) = libc::pid_t::try_from(child) {
            // SAFETY: as above.
            unsafe {
                libc::kill(child, sig);
            }
        }
    }
}

/// The processes whose parent is `pid`, from /proc (none without it).
fn children(pid: u32) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .flatten()
        .filter_map(|p| {
            let child: u32 = p.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(p.path().join("stat")).ok()?;
            let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
            let ppid: u32 = after.nth(1)?.parse().ok()?;
            (ppid == pid).then_some(child)
        })
        .collect()
}

/// Stops the group that `pid` leads with SIGSTOP and waits, at most 5 s,
/// until each of its threads has: a signal is delivered when the thread
/// next runs, so a test that checked right after kill(2) could still find
/// the server answering. Without /proc there is nothing to wait on.
fn pause_group(pid: u32) {
    signal_group(pid, libc::SIGSTOP);
    if !Path::new("/proc/self/task").is_dir() {
        return;
    }
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut pause = Duration::from_millis(1);
    while !group_stopped(pid) {
        assert!(
            Instant::now() < give_up,
            "the server (PID {pid}) did not stop within 5 s of SIGSTOP"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(POLL);
    }
}

/// Whether every thread of every process in group `pgid`, and of every
/// child of its leader, is stopped (or dead), from /proc.
fn group_stopped(pgid: u32) -> bool {
    // "pid (comm) S ppid pgrp ...": the fields after the last ')'.
    let fields = |path: PathBuf| -> Option<(char, u32)> {
        let stat = std::fs::read_to_string(path).ok()?;
        let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = after.next()?.chars().next()?;
        let pgrp = after.nth(1)?.parse().ok()?;
        Some((state, pgrp))
    };
    let family = children(pgid);
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return true;
    };
    for process in processes.flatten() {
        let dir = process.path();
        let child = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|p| family.contains(&p));
        match fields(dir.join("stat")) {
            Some((_, pgrp)) if pgrp == pgid || child => {}
            _ => continue,
        }
        let Ok(tasks) = std::fs::read_dir(dir.join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Some((state, _)) = fields(task.path().join("stat"))
                && !matches!(state, 'T' | 't' | 'Z' | 'X')
            {
                return false;
            }
        }
    }
    true
}

/// Sends `sig` to the process `pid` alone, under the same condition as
/// [`signal_group`].
fn signal_one(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a PID fits pid_t");
    // SAFETY: kill(2) on a child this process started and has not reaped.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Kills the group that `child` leads with SIGKILL and reaps the leader.
/// Removes the System V segment of a PostgreSQL server killed with
/// SIGKILL (a clean shutdown removes it itself): the kernel's table of
/// them is small (4,096 by default), and a machine that ran these tests
/// long enough had it full, every `initdb` failing with "could not create
/// shared memory segment". Its id is on the lock file's seventh line
/// (`key id`).
fn remove_shared_memory(data_dir: &Path) {
    let Ok(lock_file) = std::fs::read_to_string(data_dir.join("postmaster.pid")) else {
        return;
    };
    let Some(id) = lock_file
        .lines()
        .nth(6)
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|id| id.parse::<libc::c_int>().ok())
    else {
        return;
    };
    // SAFETY: IPC_RMID takes no buffer; an id that is gone fails harmlessly.
    unsafe {
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
    }
}

fn kill_group(child: &mut Option<Child>) {
    if let Some(mut running) = child.take() {
        // SIGKILL ends stopped processes too; no SIGCONT needed first.
        signal_group(running.id(), libc::SIGKILL);
        let _ = running.wait();
    }
}

/// Asks the server that `child` leads to shut down with `sig` and waits,
/// at most [`STOP_WITHIN`], until it has exited; a server still there then
/// is killed and the caller panics.
fn stop_group(child: &mut Option<Child>, sig: libc::c_int, name: &str) {
    let Some(running) = child.as_mut() else {
        return;
    };
    let pid = running.id();
    // A paused server would not act on the signal until thawed. The
    // signal itself goes to the leader alone: to a PostgreSQL backend,
    // SIGINT would mean "cancel your query".
    signal_group(pid, libc::SIGCONT);
    signal_one(pid, sig);
    let give_up = Instant::now() + STOP_WITHIN;
    loop {
        if let Ok(Some(_)) = running.try_wait() {
            *child = None;
            return;
        }
        if Instant::now() >= give_up {
            kill_group(child);
            panic!("{name} (PID {pid}) did not shut down within {STOP_WITHIN:?}");
        }
        std::thread::sleep(POLL);
    }
}

/// Runs a program to its end, with `input` on its standard input, for at
/// most `within` (then it is killed); its standard output when it exits
/// with 0, else what went wrong with its standard error.
fn run_tool(
    command: &mut Command,
    input: Option<&str>,
    within: Duration,
) -> Result<String, String> {
    let name = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    // Threads feed and drain the pipes, so that a large output cannot
    // block the program while this thread polls for its exit.
    let feed = child.stdin.take().map(|mut stdin| {
        let input = input.unwrap_or_default().to_owned();
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        })
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let give_up = Instant::now() + within;
    // Most runs take milliseconds: poll at 1 ms, then less and less often,
    // at most every POLL.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(POLL);
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    if let Some(feed) = feed {
        let _ = feed.join();
    }
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(stdout),
        Some(status) => Err(format!("{name} failed ({status}): {}", stderr.trim())),
        None => Err(format!(
            "{name} did not finish within {within:?}: {}",
            stderr.trim()
        )),
    }
}
