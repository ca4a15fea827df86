//! The calls that take one round trip instead of the transaction of
//! `store.rs`: the grant of a free resource and the release of one
//! resource. Each answers only where it decides alone (see
//! `routines.rs`); `false` or `None` says the call must take the full
//! transaction, which decides everything else.
//!
//! Which of them a locker may use is found at setup: they are stored
//! routines that may be missing or not executable for this user, and are
//! then not used (the log says why once).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use sqlx::Row as _;

use super::{code_of, is_missing_function, is_not_permitted, Store};
use crate::sql::dialect::Backend;
use crate::sql::routines::answer_of;
use crate::Error;

/// The one-round-trip calls a locker may use now.
pub(in crate::sql) struct Calls {
    grant: Option<Arc<str>>,
    release: Option<Arc<str>>,
    /// The doorbell procedure's call (MySQL; see `doorbell.rs`).
    ring: Option<Arc<str>>,
}

impl Calls {
    /// What a locker may use before its setup: nothing.
    pub(super) fn none() -> Calls {
        Calls {
            grant: None,
            release: None,
            ring: None,
        }
    }
}

/// Whether `err` says the database broke a deadlock: the call takes the
/// transaction, which runs again after one.
fn is_deadlock(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if matches!(code_of(&**db).as_str(), "40P01" | "40001" | "1213"))
}

/// Whether `err` says a stored routine is missing or may not be run:
/// PostgreSQL's undefined function or missing privilege, MySQL's
/// "PROCEDURE does not exist" (1305) or "execute command denied" (1370).
///
/// An ambiguous call (42725: another role made an overload beside it)
/// counts too, and the next setup finds the overload and uses none.
///
/// A missing table (42P01, 1146) counts too: the routine finds no table
/// its caller's locker uses (its body found another through a search
/// path, or the table was dropped): the transaction then makes it again,
/// or fails for what it is, and the next setup looks at the routine
/// again.
fn is_unusable_routine(err: &sqlx::Error) -> bool {
    is_missing_function(err)
        || is_not_permitted(err)
        || matches!(err, sqlx::Error::Database(db)
            if matches!(code_of(&**db).as_str(), "1305" | "1370" | "42P01" | "1146" | "42725"))
}

impl Store {
    /// Sets the stored routines' calls found at setup (`None`: the calls
    /// take the transaction, and the log says `why` once).
    pub(super) fn use_routines(&self, calls: Option<(Option<String>, String)>, why: &str) {
        let mut fast = self.fast.lock().unwrap_or_else(PoisonError::into_inner);
        match calls {
            Some((grant, release)) => {
                if let Some(grant) = grant {
                    fast.grant = Some(Arc::from(grant));
                }
                fast.release = Some(Arc::from(release));
            }
            None => {
                fast.grant = None;
                fast.release = None;
                if !self.said_why_no_fast_call.swap(true, Ordering::Relaxed) {
                    tracing::warn!(locker = %self.endpoint, "grants of free names and releases take a transaction of several statements instead of one call: {why}");
                }
            }
        }
    }

    /// Sets the doorbell procedure's call found at setup (`None`: none
    /// this user may run; hand-offs to other lockers wait for their poll).
    pub(super) fn use_ring(&self, call: Option<String>) {
        let mut fast = self.fast.lock().unwrap_or_else(PoisonError::into_inner);
        fast.ring = call.map(Arc::from);
    }

    /// The doorbell procedure's call, if there is one to use.
    #[cfg(feature = "mysql")]
    pub(in crate::sql) fn ring_call(&self) -> Option<Arc<str>> {
        self.fast
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ring
            .clone()
    }

    /// A routine this locker used is gone or no longer its to run: this
    /// call and the next take the transaction. When it (or its table) is
    /// gone, the next setup looks again, and makes it again when allowed;
    /// when this user may not run it, setups would find the same, so
    /// none is run for it.
    fn routine_lost(&self, err: sqlx::Error) {
        let gone = !is_not_permitted(&err)
            && !matches!(&err, sqlx::Error::Database(db) if code_of(&**db) == "1370");
        self.use_routines(None, &self.error(err).to_string());
        if gone {
            self.ready.store(false, Ordering::Release);
        }
    }

    /// The fast path of a grant of one free resource: whether it was made.
    /// `false` says only that the call must take the full transaction.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::sql) async fn fast_grant(
        &self,
        name: &str,
        uid: &str,
        mode: &str,
        validity_ms: i64,
        quarantine_ms: i64,
        wait: (&str, &str),
        who: (&str, &str),
    ) -> Result<bool, Error> {
        self.bounded(async {
            let Some(sql) = self
                .fast
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .grant
                .clone()
            else {
                return Ok(false);
            };
            let query = sqlx::query(&sql)
                .bind(name)
                .bind(quarantine_ms)
                .bind(uid)
                .bind(mode)
                .bind(validity_ms)
                .bind(wait.0)
                .bind(wait.1)
                .bind(who.0)
                .bind(who.1);
            // The connection first, then (MySQL) when the server last
            // started as this locker knows it: a connection opened for this
            // call (after a restart, say) has told it already.
            let mut conn = self.conn().await.map_err(|e| self.error(e))?;
            let query = match self.dialect.backend {
                Backend::Postgres => query,
                Backend::MySql => query.bind(self.started_ms.load(Ordering::Relaxed)),
            };
            let answer = query
                .fetch_one(&mut *conn)
                .await
                .and_then(|row| answer_of(&row))
                .map(|answer| answer == 1);
            self.done(conn, &answer);
            match answer {
                Ok(granted) => Ok(granted),
                Err(err) if is_deadlock(&err) => Ok(false),
                Err(err) if is_unusable_routine(&err) => {
                    self.routine_lost(err);
                    Ok(false)
                }
                Err(err) => Err(self.error(err)),
            }
        })
        .await
    }

    /// The release of one resource in one round trip: `Some(released)`,
    /// or `None` when the call must take the full transaction (no routine
    /// this locker may call, or a resource with places in line or expired
    /// rows).
    pub(in crate::sql) async fn fast_release(
        &self,
        name: &str,
        uid: &str,
        mode: &str,
    ) -> Result<Option<bool>, Error> {
        self.bounded(async {
            let Some(sql) = self
                .fast
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .release
                .clone()
            else {
                return Ok(None);
            };
            let mut conn = self.conn().await.map_err(|e| self.error(e))?;
            let answer = sqlx::query(&sql)
                .bind(name)
                .bind(uid)
                .bind(mode)
                .fetch_one(&mut *conn)
                .await
                .and_then(|row| {
                    row.try_get::<i64, _>(0)
                        .or_else(|_| row.try_get::<i32, _>(0).map(i64::from))
                });
            self.done(conn, &answer);
            match answer {
                Ok(1) => Ok(Some(true)),
                Ok(0) => Ok(Some(false)),
                Ok(_) => Ok(None),
                Err(err) if is_deadlock(&err) => Ok(None),
                Err(err) if is_unusable_routine(&err) => {
                    self.routine_lost(err);
                    Ok(None)
                }
                Err(err) => Err(self.error(err)),
            }
        })
        .await
    }
}
