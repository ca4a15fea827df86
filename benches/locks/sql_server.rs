//! The database of `--backend postgres` and `mysql`: a server of the run's
//! own (from `tests/sql_support`), or an existing one (`--sql-url`); what
//! it counts for us; its CPU time; and the connections a run leaves behind.
//!
//! # What is counted, and how
//!
//! The recipes count the statements they send themselves (the client loop
//! knows each one). The server counts everything, ours included:
//!
//! * PostgreSQL: `pg_stat_statements` (preloaded in the server started
//!   here; with `--sql-url`, when the database has the extension), summed
//!   over every statement but connection set-up (`SET ...`) and the
//!   harness's own readings. It counts statements that completed: one that
//!   failed (a duplicate key) or was cut off is not in it. Transactions
//!   are `pg_stat_database`'s `xact_commit + xact_rollback`; a backend
//!   reports those at most once a second, so the harness waits 1.1 s
//!   before each reading, and takes out its own.
//! * MariaDB and MySQL: `SHOW GLOBAL STATUS`: `Questions` (every statement
//!   a client sent, failed ones included) less `Com_set_option` (the `SET`s
//!   of a new connection) and `Com_show_status` (the readings).
//!
//! Server-side counts run from before the clients start to after the last
//! one stopped, warm-up included, and are divided by every lock taken in
//! that time; the client-side counts are those of the measured window.

use std::collections::BTreeMap;
use std::time::Duration;

use quorum_lock::sql::Backend;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Row as _};

use crate::context::Context;
use crate::sql_support::{MariaServer, PgServer};

/// The server process this run started, stopped by its PID on drop.
enum Own {
    Pg(PgServer),
    Maria(MariaServer),
}

pub struct Database {
    pub backend: Backend,
    pub url: String,
    own: Option<Own>,
    /// `SELECT version()`.
    pub version: String,
    /// Whether the server counts statements for us; when not, why.
    pub counting: Result<(), String>,
}

impl Database {
    /// A server of this run's own, on 127.0.0.1, with `pg_stat_statements`
    /// preloaded when `counters` (PostgreSQL).
    pub fn start(backend: Backend, counters: bool) -> Result<Database, String> {
        let (own, url) = match backend {
            Backend::Postgres => {
                let mut server = PgServer::start()
                    .ok_or("--backend postgres needs PostgreSQL's programs (apt-get install -y postgresql postgresql-contrib)")?;
                if counters {
                    // ALTER SYSTEM writes postgresql.auto.conf, which the
                    // restart reads.
                    server
                        .try_psql(
                            "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
                        )
                        .context("cannot preload pg_stat_statements")?;
                    server.restart_clean();
                    if let Err(e) = server.try_psql("CREATE EXTENSION pg_stat_statements") {
                        eprintln!("locks: warning: no pg_stat_statements ({e}); statements are not counted on the server");
                    }
                }
                let url = server.url();
                (Own::Pg(server), url)
            }
            Backend::MySql => {
                let server = MariaServer::start().ok_or(
                    "--backend mysql needs MariaDB's programs (apt-get install -y mariadb-server)",
                )?;
                let url = server.url();
                (Own::Maria(server), url)
            }
        };
        Ok(Database::new(backend, url, Some(own)))
    }

    /// Version and counting are read by [`inspect`](Self::inspect).
    fn new(backend: Backend, url: String, own: Option<Own>) -> Database {
        Database {
            backend,
            url,
            own,
            version: String::new(),
            counting: Err("not checked yet".into()),
        }
    }

    /// An existing database, not stopped or cleaned up by the run.
    pub fn external(backend: Backend, url: &str) -> Result<Database, String> {
        if Backend::of_url(url) != Some(backend) {
            return Err(format!(
                "--sql-url: not a {} URL (it must start with {})",
                backend.name(),
                match backend {
                    Backend::Postgres => "postgres://",
                    Backend::MySql => "mysql://",
                }
            ));
        }
        Ok(Database::new(backend, url.to_owned(), None))
    }

    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }

    /// The PID of the server process (PostgreSQL's postmaster).
    pub fn pid(&self) -> Option<u32> {
        self.own.as_ref().map(|own| match own {
            Own::Pg(s) => s.pid(),
            Own::Maria(s) => s.pid(),
        })
    }

    pub fn port(&self) -> Option<u16> {
        self.own.as_ref().map(|own| match own {
            Own::Pg(s) => s.port(),
            Own::Maria(s) => s.port(),
        })
    }

    /// User + system CPU time of the whole server: its process and its
    /// children (PostgreSQL's backends, each a process, which start a
    /// session of their own and so leave the postmaster's process group),
    /// plus what the children that exited used.
    pub fn cpu(&self) -> Option<Duration> {
        tree_cpu(self.pid()?)
    }

    /// Reads the version and whether the server counts statements.
    pub async fn inspect(&mut self, counters: bool) -> Result<(), String> {
        let mut probe = Probe::connect(self.backend, &self.url).await?;
        self.version = probe.version().await?;
        self.counting = if !counters {
            Err("off (--sql-counters off)".into())
        } else {
            probe.reading(false).await.map(|_| ())
        };
        probe.close().await;
        Ok(())
    }
}

/// User + system CPU time of process `root`, of its live children, and
/// of the exited children it waited for.
fn tree_cpu(root: u32) -> Option<Duration> {
    let mut total: u64 = 0;
    let mut root_seen = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Some(fields) = crate::stats::proc_stat(pid) else {
            continue;
        };
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        if pid == root {
            root_seen = true;
            total += field(13).unwrap_or(0) + field(14).unwrap_or(0);
        } else if field(1) != Some(u64::from(root)) {
            continue;
        }
        total += field(11).unwrap_or(0) + field(12).unwrap_or(0);
    }
    crate::stats::ticks(total).filter(|_| root_seen)
}

/// The harness's own connection: readings of the server's counters, the
/// recipes' tables, and the clean-up after a run.
pub enum Probe {
    Pg {
        conn: PgConnection,
        /// Transactions this connection ran, for taking them out.
        own: u64,
    },
    My(MySqlConnection),
}

/// The server's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Statements by text, with connection set-up and the harness's own
    /// readings left out (PostgreSQL), or the one `Questions` figure less
    /// those (MySQL: under the name "all").
    pub statements: BTreeMap<String, u64>,
    /// Transactions committed or rolled back (PostgreSQL).
    pub transactions: Option<u64>,
    /// Deadlocks the server broke (`pg_stat_database.deadlocks`, MariaDB's
    /// `Innodb_deadlocks`).
    pub deadlocks: Option<u64>,
    /// Row lock waits (MariaDB's `Innodb_row_lock_waits`).
    pub lock_waits: Option<u64>,
    /// The probe's own transactions up to this reading (PostgreSQL).
    own: u64,
}

/// What the server ran between two readings.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    pub statements: u64,
    pub transactions: Option<u64>,
    pub deadlocks: Option<u64>,
    pub lock_waits: Option<u64>,
    /// Statements by text (PostgreSQL), most first.
    pub by_statement: Vec<(String, u64)>,
}

impl Reading {
    pub fn since(&self, before: &Reading) -> Counted {
        let mut by_statement: Vec<(String, u64)> = self
            .statements
            .iter()
            .map(|(text, &n)| {
                let earlier = before.statements.get(text).copied().unwrap_or(0);
                (text.clone(), n.saturating_sub(earlier))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        by_statement.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Counted {
            statements: by_statement.iter().map(|(_, n)| n).sum(),
            transactions: match (before.transactions, self.transactions) {
                (Some(a), Some(b)) => {
                    Some(b.saturating_sub(a).saturating_sub(self.own - before.own))
                }
                _ => None,
            },
            deadlocks: delta(before.deadlocks, self.deadlocks),
            lock_waits: delta(before.lock_waits, self.lock_waits),
            by_statement,
        }
    }
}

fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// Whether a statement text is one the counts leave out: connection
/// set-up, and the harness's own readings and clean-up.
fn harness_or_setup(text: &str) -> bool {
    let t = text.trim_start().to_ascii_lowercase();
    t.starts_with("set ")
        || t.contains("pg_stat_statements")
        || t.contains("pg_stat_database")
        || t.contains("pg_stat_activity")
        || t.contains("pg_stat_force_next_flush")
}

impl Probe {
    pub async fn connect(backend: Backend, url: &str) -> Result<Probe, String> {
        let failed = |e: sqlx::Error| format!("cannot connect to the database: {e}");
        Ok(match backend {
            Backend::Postgres => Probe::Pg {
                conn: PgConnection::connect(url).await.map_err(failed)?,
                own: 0,
            },
            Backend::MySql => Probe::My(MySqlConnection::connect(url).await.map_err(failed)?),
        })
    }

    pub async fn close(self) {
        let _ = match self {
            Probe::Pg { conn, .. } => conn.close().await,
            Probe::My(conn) => conn.close().await,
        };
    }

    /// Runs one statement of the harness (table set-up), counted as the
    /// probe's own.
    pub async fn execute(&mut self, sql: &str) -> Result<(), String> {
        use sqlx::Executor as _;
        let failed = |e: sqlx::Error| format!("{sql}: {e}");
        match self {
            Probe::Pg { conn, own } => {
                *own += 1;
                conn.execute(sql).await.map_err(failed)?;
            }
            Probe::My(conn) => {
                conn.execute(sql).await.map_err(failed)?;
            }
        }
        Ok(())
    }

    async fn version(&mut self) -> Result<String, String> {
        let failed = |e: sqlx::Error| format!("cannot read the server's version: {e}");
        match self {
            Probe::Pg { conn, own } => {
                *own += 1;
                let row = sqlx::query("SELECT version()")
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(failed)?;
                row.try_get::<String, _>(0).map_err(failed)
            }
            Probe::My(conn) => {
                let row = sqlx::query("SELECT VERSION()")
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(failed)?;
                my_text(&row, 0).map_err(failed)
            }
        }
    }

    /// The server's counters now. `settle` (PostgreSQL): first wait until
    /// every backend has reported its transactions (at most a second after
    /// its last one).
    pub async fn reading(&mut self, settle: bool) -> Result<Reading, String> {
        match self {
            Probe::Pg { conn, own } => {
                if settle {
                    tokio::time::sleep(Duration::from_millis(1100)).await;
                }
                // This connection's own transactions are reported at once
                // (PostgreSQL 15 and later; older ones report within the
                // second the settle waits).
                *own += 1;
                let _ = sqlx::query("SELECT pg_stat_force_next_flush()")
                    .execute(&mut *conn)
                    .await;
                let mark = *own;
                *own += 1;
                let (transactions, deadlocks): (i64, i64) = sqlx::query_as(
                    "SELECT (xact_commit + xact_rollback)::bigint, deadlocks::bigint \
                     FROM pg_stat_database WHERE datname = current_database()",
                )
                .fetch_one(&mut *conn)
                .await
                .context("cannot read pg_stat_database")?;
                *own += 1;
                let rows = sqlx::query(
                    "SELECT query, calls::bigint FROM pg_stat_statements \
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                )
                .fetch_all(&mut *conn)
                .await
                .context("pg_stat_statements cannot be read")?;
                let mut statements = BTreeMap::new();
                for row in rows {
                    let text: String = row.try_get(0).map_err(|e| e.to_string())?;
                    let calls: i64 = row.try_get(1).map_err(|e| e.to_string())?;
                    if harness_or_setup(&text) {
                        continue;
                    }
                    // The same text can show twice (another user, or a
                    // top-level and a nested entry): add them up.
                    *statements.entry(one_line(&text)).or_insert(0) +=
                        u64::try_from(calls).unwrap_or(0);
                }
                Ok(Reading {
                    statements,
                    transactions: u64::try_from(transactions).ok(),
                    deadlocks: u64::try_from(deadlocks).ok(),
                    lock_waits: None,
                    own: mark,
                })
            }
            Probe::My(conn) => {
                use sqlx::Executor as _;
                // As text, the way a client types it.
                let rows = conn
                    .fetch_all(
                        "SHOW GLOBAL STATUS WHERE Variable_name IN \
                         ('Questions', 'Com_set_option', 'Com_show_status', \
                         'Innodb_deadlocks', 'Innodb_row_lock_waits')",
                    )
                    .await
                    .context("SHOW GLOBAL STATUS failed")?;
                let mut values = BTreeMap::new();
                for row in rows {
                    let name = my_text(&row, 0).map_err(|e| e.to_string())?;
                    let value = my_text(&row, 1).map_err(|e| e.to_string())?;
                    values.insert(name.to_ascii_lowercase(), value.parse::<u64>().unwrap_or(0));
                }
                let get = |k: &str| values.get(k).copied().unwrap_or(0);
                let all = get("questions")
                    .saturating_sub(get("com_set_option"))
                    .saturating_sub(get("com_show_status"));
                Ok(Reading {
                    statements: BTreeMap::from([("all".to_owned(), all)]),
                    transactions: None,
                    deadlocks: values.get("innodb_deadlocks").copied(),
                    lock_waits: values.get("innodb_row_lock_waits").copied(),
                    own: 0,
                })
            }
        }
    }

    /// Ends the connections a run left behind on a server of our own:
    /// waits cut off at the end of the window, still queued for a lock in
    /// the server after their client dropped them. Everything else of the
    /// run has been closed by then; this connection stays.
    pub async fn end_leftovers(&mut self) -> Result<u64, String> {
        match self {
            Probe::Pg { conn, own } => {
                *own += 1;
                let ended: i64 = sqlx::query_scalar(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))::bigint \
                     FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                )
                .fetch_one(&mut *conn)
                .await
                .context("cannot end the run's leftover connections")?;
                Ok(u64::try_from(ended).unwrap_or(0))
            }
            Probe::My(conn) => {
                // Without the PROCESS privilege a user sees its own
                // connections only: those of the run.
                // Signed: the column's type differs between servers (and
                // between an empty and a full list on MariaDB).
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT CAST(ID AS SIGNED) FROM information_schema.PROCESSLIST \
                     WHERE ID <> CONNECTION_ID() AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)",
                )
                .fetch_all(&mut *conn)
                .await
                .context("cannot list the run's leftover connections")?;
                let mut ended = 0;
                for id in ids {
                    use sqlx::Executor as _;
                    if conn
                        .execute(format!("KILL CONNECTION {id}").as_str())
                        .await
                        .is_ok()
                    {
                        ended += 1;
                    }
                }
                Ok(ended)
            }
        }
    }
}

/// Column `i` of a MySQL row as text: the server sends the results of
/// functions and of `SHOW` as bytes, where a column would be a string.
fn my_text(row: &sqlx::mysql::MySqlRow, i: usize) -> Result<String, sqlx::Error> {
    let bytes = || row.try_get::<Vec<u8>, _>(i);
    (row.try_get::<String, _>(i)).or_else(|_| bytes().map(|b| String::from_utf8_lossy(&b).into()))
}

/// A statement's text on one line, whitespace runs as one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
