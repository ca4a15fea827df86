//! Finding the lock tables, or making them: the server's version checked
//! first, and a table found missing under a running locker made again in a
//! new epoch.

use std::sync::atomic::Ordering;

use sqlx::{Connection, Executor};

use super::{code_of, is_missing_table, Store};
use crate::sql::dialect::Backend;
use crate::Error;

impl Store {
    /// Checks the server's version and that the tables exist, creating
    /// them when allowed.
    pub(super) async fn setup(&self) -> Result<(), Error> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.error(e))?;
        let version: String = sqlx::query_scalar(self.dialect.version())
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| self.error(e))?;
        check_version(self.dialect.backend, &version).map_err(|why| self.unavailable(why))?;
        match conn.execute(self.dialect.table_exists().as_str()).await {
            Ok(_) => return self.routines(&mut conn).await,
            Err(err) if !is_missing_table(&err) => return Err(self.error(err)),
            Err(_) => {}
        }
        if !self.create_tables {
            return Err(self.unavailable(format!(
                "the table {} does not exist and create_tables is off; run the statements of \
                 quorum_lock::sql::schema() once, as a user allowed to create tables",
                self.dialect.tables.entries
            )));
        }
        let statements = self
            .dialect
            .create_in(self.found_before.load(Ordering::Acquire));
        match self.dialect.backend {
            // Transactional DDL: the tables and the first epoch marker
            // appear together or not at all; a concurrent creator makes
            // this one fail, and the tables are there.
            Backend::Postgres => {
                let mut tx = conn.begin().await.map_err(|e| self.error(e))?;
                for statement in &statements {
                    if let Err(err) = tx.execute(statement.as_str()).await {
                        drop(tx);
                        if !is_already_there(&err) {
                            return Err(self.error(err));
                        }
                        // A concurrent creator made the tables; unless what
                        // exists is something else of the same name, and
                        // this rolled back leaves no table.
                        return match conn.execute(self.dialect.table_exists().as_str()).await {
                            Ok(_) => Ok(()),
                            Err(missing) if is_missing_table(&missing) => {
                                Err(self.unavailable(format!(
                                    "cannot create the table {}: {} (another object has a \
                                     name it needs; choose another table_prefix)",
                                    self.dialect.tables.entries,
                                    match self.error(err) {
                                        Error::LockerUnavailable { reason, .. } => reason,
                                        other => other.to_string(),
                                    }
                                )))
                            }
                            Err(other) => Err(self.error(other)),
                        };
                    }
                }
                tx.commit().await.map_err(|e| self.error(e))?;
            }
            // DDL commits at once on MySQL: only the process whose CREATE
            // TABLE succeeded writes the marker; if it stops in between,
            // the marker is missing and the first call quarantines, which
            // is safe.
            Backend::MySql => {
                for (i, statement) in statements.iter().enumerate() {
                    if let Err(err) = conn.execute(statement.as_str()).await {
                        if i == 0 && is_already_there(&err) {
                            return Ok(());
                        }
                        return Err(self.error(err));
                    }
                }
            }
        }
        tracing::info!(locker = %self.endpoint, table = %self.dialect.tables.entries, "created the lock tables");
        Ok(())
    }
}

impl Store {
    /// Checks that the stored routines of this version exist beside tables
    /// found in place, and makes them when allowed: tables made by an older
    /// version of the library have none, or those of another version.
    async fn routines(
        &self,
        conn: &mut sqlx::pool::PoolConnection<sqlx::Any>,
    ) -> Result<(), Error> {
        let Some(exist) = self.dialect.routines_exist() else {
            return Ok(());
        };
        let there = |found: Result<bool, sqlx::Error>| found.map_err(|e| self.error(e));
        if there(sqlx::query_scalar(&exist).fetch_one(&mut **conn).await)? {
            return Ok(());
        }
        if !self.create_tables {
            return Err(self.unavailable(format!(
                "the lock tables have no stored function {} (they were made by an older \
                 version of the library, or by hand) and create_tables is off; run the \
                 CREATE FUNCTION statement of quorum_lock::sql::schema() once, as a user \
                 allowed to create functions",
                self.dialect.tables.release
            )));
        }
        for statement in self.dialect.routines() {
            if let Err(err) = conn.execute(statement.as_str()).await {
                // Two lockers replacing the same function at once: one
                // of them fails, and the function is there.
                if there(sqlx::query_scalar(&exist).fetch_one(&mut **conn).await)? {
                    return Ok(());
                }
                return Err(self.error(err));
            }
        }
        tracing::info!(locker = %self.endpoint, function = %self.dialect.tables.release, "made the stored functions of this version beside tables found in place");
        Ok(())
    }
}

/// Whether `err` says what was being created exists already (a concurrent
/// creator won).
fn is_already_there(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db)
        if matches!(code_of(&**db).as_str(), "42P07" | "23505" | "42710" | "1050"))
}

/// Refuses servers older than the locker supports.
pub(super) fn check_version(backend: Backend, version: &str) -> Result<(), String> {
    let numbers = |text: &str| -> Vec<u64> {
        text.split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .take(3)
            .filter_map(|part| part.parse().ok())
            .collect()
    };
    match backend {
        Backend::Postgres => {
            let num = numbers(version).first().copied().unwrap_or(0);
            if num < 130_000 {
                return Err(format!(
                    "PostgreSQL {} is too old: the locker needs 13 or later",
                    version.split_whitespace().nth(2).unwrap_or(version)
                ));
            }
        }
        Backend::MySql => {
            let n = numbers(version);
            let (major, minor) = (
                n.first().copied().unwrap_or(0),
                n.get(1).copied().unwrap_or(0),
            );
            let maria = version.to_ascii_lowercase().contains("mariadb");
            let old = if maria {
                (major, minor) < (10, 6)
            } else {
                major < 8
            };
            if old {
                return Err(format!(
                    "{} {version} is too old: the locker needs MySQL 8 or MariaDB 10.6 or later",
                    if maria { "MariaDB" } else { "MySQL" }
                ));
            }
        }
    }
    Ok(())
}
