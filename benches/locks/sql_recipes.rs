//! The classic SQL lock recipes, written plainly, as an application would
//! without a lock library: one connection per client, the statements
//! below and nothing else.
//!
//! * `insert`: a lock table with a unique key. `INSERT` the name to lock;
//!   on a duplicate key (or the deadlock InnoDB may report instead), sleep
//!   50 ms and try again; `DELETE` it to unlock. Autocommit: each
//!   statement is a transaction.
//! * `for-update`: a table with one pre-created row per name. `BEGIN`,
//!   `SELECT ... FOR UPDATE` of the row to lock, and the transaction stays
//!   open while the lock is held; `COMMIT` to unlock.
//! * `advisory` (PostgreSQL): session advisory locks,
//!   `pg_advisory_lock(key)` and `pg_advisory_unlock(key)`, the key a hash
//!   of the name. `get_lock` (MariaDB, MySQL): `GET_LOCK(name, timeout)`
//!   and `RELEASE_LOCK(name)`; a timeout (0) is asked again.
//!
//! A wait that the end of the window cuts off drops its connection: the
//! server then ends the session, which lets go of whatever it held.

use std::time::Duration;

use quorum_lock::sql::Backend;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Executor as _};
use tokio::time::Instant;

/// The lock table of `insert`.
pub const INSERT_TABLE: &str = "bench_unique_locks";
/// The rows of `for-update`.
pub const ROW_TABLE: &str = "bench_row_locks";

/// How long `insert` sleeps after a duplicate key before it tries again.
const INSERT_RETRY: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recipe {
    Insert,
    ForUpdate,
    Advisory,
}

impl Recipe {
    pub const ALL: [Recipe; 3] = [Recipe::Insert, Recipe::ForUpdate, Recipe::Advisory];

    pub fn label(self, backend: Backend) -> &'static str {
        match (self, backend) {
            (Recipe::Insert, _) => "insert",
            (Recipe::ForUpdate, _) => "for-update",
            (Recipe::Advisory, Backend::Postgres) => "advisory",
            (Recipe::Advisory, Backend::MySql) => "get_lock",
        }
    }
}

/// The recipes' tables, created once per server by the harness.
pub fn create_tables(backend: Backend) -> Vec<String> {
    match backend {
        Backend::Postgres => vec![
            format!("CREATE TABLE IF NOT EXISTS {INSERT_TABLE} (name text PRIMARY KEY)"),
            format!("CREATE TABLE IF NOT EXISTS {ROW_TABLE} (name text PRIMARY KEY)"),
        ],
        Backend::MySql => vec![
            format!(
                "CREATE TABLE IF NOT EXISTS {INSERT_TABLE} (name varchar(191) PRIMARY KEY) ENGINE=InnoDB"
            ),
            format!(
                "CREATE TABLE IF NOT EXISTS {ROW_TABLE} (name varchar(191) PRIMARY KEY) ENGINE=InnoDB"
            ),
        ],
    }
}

/// The statement that creates the row `for-update` locks for `name`
/// (names contain no quotes: the harness makes them).
pub fn create_row(backend: Backend, name: &str) -> String {
    match backend {
        Backend::Postgres => {
            format!("INSERT INTO {ROW_TABLE} (name) VALUES ('{name}') ON CONFLICT DO NOTHING")
        }
        Backend::MySql => format!("INSERT IGNORE INTO {ROW_TABLE} (name) VALUES ('{name}')"),
    }
}

/// A stable 64-bit key for an advisory lock: FNV-1a of the name.
fn advisory_key(name: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

enum Conn {
    Pg(PgConnection),
    My(MySqlConnection),
}

/// One client of a recipe: its connection, its name, and the statements
/// it has sent.
pub struct RecipeClient {
    conn: Conn,
    recipe: Recipe,
    name: String,
    key: i64,
    /// When the run's window closes: `GET_LOCK` asks for no longer.
    end: Instant,
    /// Statements sent so far, each counted as it goes out.
    pub sent: u64,
}

/// `$body` with `$c` bound to the connection, PostgreSQL's or MySQL's, and
/// `$q` to the one of a pair of statements that connection speaks: the two
/// drivers' connections are different types, the recipe's steps the same.
macro_rules! either {
    ($conn:expr_2021, $c:ident, $body:expr_2021) => {
        match $conn {
            Conn::Pg($c) => $body,
            Conn::My($c) => $body,
        }
    };
    ($conn:expr_2021, $c:ident, $q:ident = ($pg:expr_2021, $my:expr_2021), $body:expr_2021) => {
        match $conn {
            Conn::Pg($c) => {
                let $q = $pg;
                $body
            }
            Conn::My($c) => {
                let $q = $my;
                $body
            }
        }
    };
}

/// Whether an `INSERT` found the lock taken: a duplicate key (PostgreSQL
/// unique_violation, MySQL ER_DUP_ENTRY), or on MariaDB and MySQL the
/// deadlock InnoDB reports now and then instead (its next-key locks on the
/// unique index between an INSERT and a concurrent DELETE): the statement
/// was rolled back, and the lock is not ours either way.
fn taken(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Database(db) => {
            db.is_unique_violation() || matches!(db.code().as_deref(), Some("40001" | "40P01"))
        }
        _ => false,
    }
}

impl RecipeClient {
    pub async fn connect(
        backend: Backend,
        url: &str,
        recipe: Recipe,
        name: String,
        end: Instant,
    ) -> Result<RecipeClient, String> {
        let failed =
            |e: sqlx::Error| format!("a {} client cannot connect: {e}", recipe.label(backend));
        let conn = match backend {
            Backend::Postgres => Conn::Pg(PgConnection::connect(url).await.map_err(failed)?),
            Backend::MySql => Conn::My(MySqlConnection::connect(url).await.map_err(failed)?),
        };
        Ok(RecipeClient {
            conn,
            recipe,
            key: advisory_key(&name),
            name,
            end,
            sent: 0,
        })
    }

    /// Takes the lock, waiting as the recipe waits.
    pub async fn acquire(&mut self) -> Result<(), String> {
        let label = self.recipe.label(self.backend());
        let name = self.name.as_str();
        let failed = |what: &str, e: sqlx::Error| format!("{label}: {what}: {e}");
        match (&mut self.conn, self.recipe) {
            (conn, Recipe::Insert) => either!(
                conn,
                c,
                q = (INSERT_PG, INSERT_MY),
                loop {
                    self.sent += 1;
                    match sqlx::query(q).bind(name).execute(&mut *c).await {
                        Ok(_) => return Ok(()),
                        Err(e) if taken(&e) => tokio::time::sleep(INSERT_RETRY).await,
                        Err(e) => return Err(failed("INSERT", e)),
                    }
                }
            ),
            (conn, Recipe::ForUpdate) => either!(conn, c, q = (FOR_UPDATE_PG, FOR_UPDATE_MY), {
                self.sent += 1;
                c.execute("BEGIN").await.map_err(|e| failed("BEGIN", e))?;
                self.sent += 1;
                let row = sqlx::query(q)
                    .bind(name)
                    .fetch_optional(&mut *c)
                    .await
                    .map_err(|e| failed("SELECT ... FOR UPDATE", e))?;
                row.map(|_| ())
                    .ok_or_else(|| format!("for-update: no row for {name}"))
            }),
            (Conn::Pg(c), Recipe::Advisory) => {
                self.sent += 1;
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(self.key)
                    .execute(&mut *c)
                    .await
                    .map_err(|e| failed("pg_advisory_lock", e))?;
                Ok(())
            }
            (Conn::My(c), Recipe::Advisory) => loop {
                // Asks for the rest of the window (the client gives up
                // then anyway), at least a second.
                let left = self.end.saturating_duration_since(Instant::now());
                let timeout = left.as_secs() + 1;
                self.sent += 1;
                let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, ?)")
                    .bind(name)
                    .bind(timeout)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(|e| failed("GET_LOCK", e))?;
                match got {
                    Some(1) => return Ok(()),
                    Some(0) => continue,
                    other => return Err(format!("get_lock: GET_LOCK answered {other:?}")),
                }
            },
        }
    }

    /// Lets go of the lock; fails if the recipe finds it was not held.
    pub async fn release(&mut self) -> Result<(), String> {
        let label = self.recipe.label(self.backend());
        let name = self.name.as_str();
        let failed = |what: &str, e: sqlx::Error| format!("{label}: {what}: {e}");
        self.sent += 1;
        match (&mut self.conn, self.recipe) {
            (conn, Recipe::Insert) => either!(conn, c, q = (DELETE_PG, DELETE_MY), {
                let done = sqlx::query(q)
                    .bind(name)
                    .execute(&mut *c)
                    .await
                    .map_err(|e| failed("DELETE", e))?;
                one(done.rows_affected(), label)
            }),
            (conn, Recipe::ForUpdate) => either!(conn, c, {
                c.execute("COMMIT").await.map_err(|e| failed("COMMIT", e))?;
                Ok(())
            }),
            (Conn::Pg(c), Recipe::Advisory) => {
                let released: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
                    .bind(self.key)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(|e| failed("pg_advisory_unlock", e))?;
                one(u64::from(released), label)
            }
            (Conn::My(c), Recipe::Advisory) => {
                let released: Option<i64> = sqlx::query_scalar("SELECT RELEASE_LOCK(?)")
                    .bind(name)
                    .fetch_one(&mut *c)
                    .await
                    .map_err(|e| failed("RELEASE_LOCK", e))?;
                one(u64::from(released == Some(1)), label)
            }
        }
    }

    fn backend(&self) -> Backend {
        match self.conn {
            Conn::Pg(_) => Backend::Postgres,
            Conn::My(_) => Backend::MySql,
        }
    }

    /// Closes the connection the way a client that is done does.
    pub async fn close(self) {
        let _ = either!(self.conn, c, c.close().await);
    }
}

/// A release that let go of nothing means two holders overlapped.
fn one(affected: u64, label: &str) -> Result<(), String> {
    if affected == 1 {
        Ok(())
    } else {
        Err(format!(
            "{label}: the unlock found the lock not held: two holders overlapped"
        ))
    }
}

const INSERT_PG: &str = "INSERT INTO bench_unique_locks (name) VALUES ($1)";
const INSERT_MY: &str = "INSERT INTO bench_unique_locks (name) VALUES (?)";
const DELETE_PG: &str = "DELETE FROM bench_unique_locks WHERE name = $1";
const DELETE_MY: &str = "DELETE FROM bench_unique_locks WHERE name = ?";
const FOR_UPDATE_PG: &str = "SELECT name FROM bench_row_locks WHERE name = $1 FOR UPDATE";
const FOR_UPDATE_MY: &str = "SELECT name FROM bench_row_locks WHERE name = ? FOR UPDATE";
