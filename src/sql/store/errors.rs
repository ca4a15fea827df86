//! Database errors in words: what each says to do about it, never the
//! URL or its credentials; and the codes that classify them.

use std::sync::atomic::Ordering;

use super::search_path::Ambiguous;
use super::Store;
use crate::Error;

impl Store {
    /// A database error in words that say what to do about it; never the
    /// URL or its credentials.
    pub(in crate::sql) fn error(&self, err: sqlx::Error) -> Error {
        if is_missing_table(&err) {
            // Dropped under a running locker: the next call makes it again.
            self.ready.store(false, Ordering::Release);
        }
        let reason = match &err {
            sqlx::Error::Database(db) => {
                let code = code_of(&**db);
                let message = db.message();
                match code.as_str() {
                    "42501" | "1142" | "1044" | "1143" => format!(
                        "the database user lacks a privilege the locker needs ({message}); grant \
                         SELECT, INSERT, UPDATE and DELETE on the lock tables (and CREATE, or \
                         create them once with the statements of quorum_lock::sql::schema())"
                    ),
                    "28P01" | "28000" | "1045" => {
                        format!("the database refused the credentials ({message})")
                    }
                    "25006" | "1290" | "1836" | "1792" => format!(
                        "the database is read-only ({message}): a replica, or read_only is \
                         set; point the locker at the primary"
                    ),
                    "42P10" => format!(
                        "a lock table lacks the primary key its statements rely on \
                         ({message}): restored without it? Add it back as \
                         quorum_lock::sql::schema() declares it"
                    ),
                    "42P01" | "1146" => format!(
                        "a lock table does not exist ({message}): dropped while the locker ran? \
                         The next call makes it again (when create_tables is on), in a new \
                         epoch, so in quarantine"
                    ),
                    "42883" => format!(
                        "a stored function of the lock tables does not exist ({message}): \
                         dropped while the locker ran, with create_tables off? Run the CREATE \
                         FUNCTION statement of quorum_lock::sql::schema() again"
                    ),
                    "3D000" | "1049" => format!(
                        "the database named in the URL does not exist ({message}); create it"
                    ),
                    "55P03" | "57014" | "1205" => format!(
                        "a lock or statement in the database waited longer than the call \
                         timeout ({message})"
                    ),
                    _ => format!("the database answered an error (code {code}): {message}"),
                }
            }
            // The refusal is told once: a later timeout (the database gone
            // down since, say) may have another cause.
            sqlx::Error::PoolTimedOut => match self
                .refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
            {
                Some(refusal) => format!("a new connection was refused: {refusal}"),
                None => format!(
                    "no connection of the pool was free within {:?}: the pool is exhausted or \
                     the database cannot be reached",
                    self.call_timeout
                ),
            },
            sqlx::Error::Io(io) => format!("cannot reach the database: {io}"),
            sqlx::Error::Tls(tls) => format!("TLS with the database failed: {tls}"),
            sqlx::Error::Configuration(inner) => match inner.downcast_ref::<Ambiguous>() {
                Some(ambiguous) => ambiguous.0.clone(),
                None => "the URL's settings are not usable (check the scheme, port and parameters)"
                    .into(),
            },
            sqlx::Error::Protocol(what) => {
                format!("the server does not speak the protocol: {what}")
            }
            sqlx::Error::PoolClosed => "the locker was closed".into(),
            other => format!("the database call failed: {other}"),
        };
        self.unavailable(reason)
    }
}

/// The code of a database error: PostgreSQL's SQLSTATE, MySQL's error
/// number (its SQLSTATEs are too coarse: one for a missing privilege and a
/// syntax error alike).
pub(super) fn code_of(db: &dyn sqlx::error::DatabaseError) -> String {
    #[cfg(feature = "mysql")]
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return my.number().to_string();
    }
    db.code().unwrap_or_default().into_owned()
}

/// Whether `err` says a table does not exist.
pub(super) fn is_missing_table(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if matches!(code_of(&**db).as_str(), "42P01" | "1146"))
}

/// Whether `err` says a function does not exist (PostgreSQL).
pub(super) fn is_missing_function(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if code_of(&**db) == "42883")
}

/// Whether `err` says this user lacks a privilege (PostgreSQL).
pub(super) fn is_not_permitted(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if code_of(&**db) == "42501")
}
