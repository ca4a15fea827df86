//! Finding the lock tables, or making them: the server's version checked
//! first, and a table found missing under a running locker made again in a
//! new epoch.

use std::sync::atomic::Ordering;

use sqlx::pool::PoolConnection;
use sqlx::{Any, Connection, Executor};

use super::{code_of, is_missing_table, Store};
use crate::sql::dialect::Backend;
use crate::Error;

impl Store {
    /// Checks the server's version and that the tables exist, creating
    /// them when allowed.
    pub(super) async fn setup(&self) -> Result<(), Error> {
        let mut conn = self.conn().await.map_err(|e| self.error(e))?;
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
                            Ok(_) => self.routines(&mut conn).await,
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
                            return self.routines(&mut conn).await;
                        }
                        return Err(self.error(err));
                    }
                }
            }
        }
        tracing::info!(locker = %self.endpoint, table = %self.dialect.tables.entries, "created the lock tables");
        self.routines(&mut conn).await
    }
}

impl Store {
    /// Finds this version's stored routines beside the tables, makes them
    /// when allowed, and keeps their calls for the one-round-trip grant
    /// and release. Where there are none this locker may call (tables made
    /// by hand or by an older version, no right to create routines,
    /// `EXECUTE` revoked), those calls take the full transaction, as
    /// before: slower, and as safe; the log says so once.
    ///
    /// The tables' shape and owners are checked first (see `shape.rs`).
    async fn routines(&self, conn: &mut PoolConnection<Any>) -> Result<(), Error> {
        match self.dialect.backend {
            Backend::Postgres => {
                self.warn_foreign_owners(conn).await?;
                self.postgres_routines(conn).await
            }
            Backend::MySql => {
                self.mysql_shape(conn).await?;
                self.mysql_routines(conn).await
            }
        }
    }

    /// PostgreSQL's grant and release functions, in the entries table's
    /// own schema (never found through a search path, which could lead to
    /// another deployment's), naming the table there.
    async fn postgres_routines(&self, conn: &mut PoolConnection<Any>) -> Result<(), Error> {
        let Some(find_schema) = self.dialect.table_schema() else {
            return Ok(());
        };
        let schema: Option<String> = sqlx::query_scalar(find_schema)
            .bind(self.dialect.tables.entries.as_str())
            .fetch_optional(&mut **conn)
            .await
            .map_err(|e| self.error(e))?;
        // A schema name that is not a plain identifier is never put into
        // SQL text (nor into a function's body): releases take the
        // transaction there.
        let Some(schema) = schema.filter(|s| crate::sql::dialect::plain_identifier(s)) else {
            self.use_routines(
                None,
                "the lock table's schema name is not a plain identifier",
            );
            return Ok(());
        };
        let quoted = format!("\"{schema}\"");
        // Only functions with this version's bodies over this schema's
        // table: one made from statements that name the table without its
        // schema would act on whatever table a caller's search path finds.
        let mut why = None;
        for (signature, ours, make) in self.dialect.functions_in(&quoted) {
            let (mut exists, mut executable, body, trusted) =
                self.release_usable(conn, &signature).await?;
            let mut foreign = exists && (body != ours || !trusted);
            if (!exists || foreign) && self.create_tables {
                if let Err(err) = conn.execute(make.as_str()).await {
                    // Two lockers making it at once: one fails, and it is
                    // there. Or this user may not create functions.
                    // The database's words: escaped, a secret masked.
                    let err = crate::locker::escape_peer_text(&err.to_string());
                    tracing::debug!(locker = %self.endpoint, "making {signature}: {err}");
                }
                let (body, trusted);
                (exists, executable, body, trusted) = self.release_usable(conn, &signature).await?;
                foreign = exists && (body != ours || !trusted);
            }
            why = why.or(if !exists {
                Some(
                    "the lock tables have no stored functions of this version (made by hand or \
                     by an older version, and this user may not create them); run the CREATE \
                     FUNCTION statements of quorum_lock::sql::schema() once",
                )
            } else if foreign {
                Some(
                    "a stored function found beside the tables is not this version's over \
                     this schema's table (made from schema()'s statements without a schema \
                     set?), or is owned by a role that is neither this user nor the lock \
                     table's owner, and this user may not replace it; set SqlConfig::schema \
                     and run schema()'s CREATE FUNCTION statements again, as this user or the \
                     table's owner",
                )
            } else if !executable {
                Some("this user may not execute the stored functions; grant it EXECUTE on them")
            } else {
                None
            });
        }
        match why {
            None => self.use_routines(
                Some((
                    Some(self.dialect.fast_grant_in(&quoted)),
                    self.dialect.fast_release_in(&quoted),
                )),
                "",
            ),
            Some(why) => self.use_routines(None, why),
        }
        Ok(())
    }

    /// MySQL's grant and release procedures, in the tables' database. A
    /// user sees only the procedures it may run, so two found are two
    /// usable.
    async fn mysql_routines(&self, conn: &mut PoolConnection<Any>) -> Result<(), Error> {
        let sql = self.dialect.mysql_routines_found();
        let (grant, release) = self.dialect.mysql_bodies();
        let bodies = [grant.as_str(), release.as_str()];
        let mut count = self.count_with(conn, &sql, &bodies).await?;
        if count < 2 && self.create_tables {
            for statement in self.dialect.mysql_routines() {
                if let Err(err) = conn.execute(statement.as_str()).await {
                    let err = crate::locker::escape_peer_text(&err.to_string());
                    tracing::debug!(locker = %self.endpoint, "making the stored procedures: {err}");
                    break;
                }
            }
            count = self.count_with(conn, &sql, &bodies).await?;
        }
        if count >= 2 {
            self.use_routines(
                Some((
                    Some(self.dialect.mysql_grant_call()),
                    self.dialect.mysql_release_call(),
                )),
                "",
            );
        } else {
            self.use_routines(
                None,
                "the lock tables have no stored procedures of this version this user may run \
                 and see the body of (made by hand, by another user or by an older version, \
                 and this user may not make them again); let this user make them (CREATE \
                 ROUTINE, ALTER ROUTINE), or run the CREATE PROCEDURE statements of \
                 quorum_lock::sql::schema() as this user",
            );
        }
        // The doorbell's (a wake-up only: without it, hand-offs to other
        // lockers wait for their poll).
        let sql = self.dialect.mysql_ring_found();
        let ring = self.dialect.mysql_ring_body();
        let mut found = self.count_with(conn, &sql, &[ring.as_str()]).await?;
        if found < 1 && self.create_tables {
            for statement in self.dialect.mysql_ring() {
                if let Err(err) = conn.execute(statement.as_str()).await {
                    let err = crate::locker::escape_peer_text(&err.to_string());
                    tracing::debug!(locker = %self.endpoint, "making the doorbell procedure: {err}");
                    break;
                }
            }
            found = self.count_with(conn, &sql, &[ring.as_str()]).await?;
        }
        self.use_ring((found >= 1).then(|| self.dialect.mysql_ring_call()));
        Ok(())
    }

    /// The number `sql` counts, with `binds` bound in order.
    async fn count_with(
        &self,
        conn: &mut PoolConnection<Any>,
        sql: &str,
        binds: &[&str],
    ) -> Result<i64, Error> {
        let mut query = sqlx::query_scalar::<_, i64>(sql);
        for bind in binds {
            query = query.bind(*bind);
        }
        query
            .fetch_one(&mut **conn)
            .await
            .map_err(|e| self.error(e))
    }

    /// Whether the function of `signature` exists, whether this user may
    /// execute it, its body, and whether its owner is this user or the
    /// lock table's.
    async fn release_usable(
        &self,
        conn: &mut PoolConnection<Any>,
        signature: &str,
    ) -> Result<(bool, bool, String, bool), Error> {
        sqlx::query_as::<_, (bool, bool, String, bool)>(self.dialect.routine_usable())
            .bind(signature)
            .bind(self.dialect.tables.entries.as_str())
            .fetch_one(&mut **conn)
            .await
            .map_err(|e| self.error(e))
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
