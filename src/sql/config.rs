//! `SqlConfig`: how a `SqlLocker` connects, names its tables and keeps
//! entries; the DDL of its tables (`schema`); and the limits on what the
//! tables store. Durations past `LONGEST` are taken as it, so every
//! deadline fits the databases' timestamp types.

use std::time::Duration;

use super::dialect::Backend;
use super::dialect::{Dialect, Tables};
use crate::Error;

/// The longest validity or quarantine used: ten years. Longer ones
/// (`Duration::MAX` included) are taken as this.
pub(super) const LONGEST: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Longest owner and source stored; longer ones are cut (they are only
/// shown in listings).
pub(super) const MAX_LABEL_LEN: usize = 1024;

/// How a [`SqlLocker`](super::SqlLocker) connects, names its tables and keeps entries.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::sql::SqlConfig;
///
/// let config = SqlConfig {
///     table_prefix: "billing_locks_".into(),
///     ..SqlConfig::default()
/// };
/// assert_eq!(config.validity, Duration::from_secs(60));
/// assert_eq!(config.quarantine, config.validity);
/// ```
#[derive(Debug, Clone)]
pub struct SqlConfig {
    /// Prepended to both table names (`<prefix>entries`, `<prefix>fence`):
    /// ASCII letters, digits and underscores, at most 40.
    pub table_prefix: String,
    /// The schema (PostgreSQL) or database (MySQL) of the tables; `None`
    /// uses the connection's default (`search_path`, the URL's database).
    pub schema: Option<String>,
    /// How long an entry that is not refreshed is kept.
    pub validity: Duration,
    /// How long after a new epoch of the table (see the module docs) the
    /// locker refuses grants and every answer that would count. Shorter
    /// than the validity, it is taken as the validity; zero is only safe
    /// for a database that never granted a lock before, as in tests.
    pub quarantine: Duration,
    /// How long one call, connecting included, may take; the database is
    /// told the same bound for statements and lock waits, and twice it for
    /// a transaction left idle, so that a client stopped mid-call frees
    /// its rows (PostgreSQL and MariaDB; MySQL has no such setting).
    pub call_timeout: Duration,
    /// Connections in the pool; calls beyond it wait for one, up to the
    /// call timeout.
    pub pool_size: u32,
    /// How often waiters (MySQL) and leader watches (both) are checked.
    pub poll_interval: Duration,
    /// Whether to create the tables when they are missing. Off, a missing
    /// table is an error that says to run [`schema`]'s statements.
    pub create_tables: bool,
}

impl Default for SqlConfig {
    fn default() -> Self {
        SqlConfig {
            table_prefix: "quorum_lock_".into(),
            schema: None,
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
            call_timeout: Duration::from_secs(5),
            pool_size: 16,
            poll_interval: Duration::from_millis(50),
            create_tables: true,
        }
    }
}

/// The statements that create the tables of `config` on `backend`, for
/// teams whose applications may not run DDL: run them once, in order, as a
/// user who may, and give the locker's user `SELECT`, `INSERT`, `UPDATE`
/// and `DELETE` on both tables. On PostgreSQL the last statement makes the
/// stored function that releases a lock in one round trip; a locker whose
/// user may not execute it (or that finds none) releases by a transaction
/// instead, and says so once in its log.
///
/// ```
/// use quorum_lock::sql::{schema, Backend, SqlConfig};
///
/// # #[cfg(feature = "postgres")] {
/// let ddl = schema(Backend::Postgres, &SqlConfig::default())?;
/// assert!(ddl[0].starts_with("CREATE UNLOGGED TABLE \"quorum_lock_entries\""));
/// # }
/// # Ok::<(), quorum_lock::Error>(())
/// ```
pub fn schema(backend: Backend, config: &SqlConfig) -> Result<Vec<String>, Error> {
    let tables = Tables::new(backend, config.schema.as_deref(), &config.table_prefix)?;
    let dialect = Dialect { backend, tables };
    let mut statements = dialect.create();
    statements.extend(dialect.routines());
    statements.extend(dialect.mysql_routines());
    statements.extend(dialect.mysql_ring());
    Ok(statements)
}
