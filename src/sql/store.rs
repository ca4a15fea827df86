//! The database side of a `SqlLocker`: the connection pool, creating the
//! tables, and the one short transaction every call is.
//!
//! A call's transaction, under read committed:
//!
//! 1. locks the rows of its resources, creating them where missing
//!    (`Dialect::lock_resources`), in sorted order;
//! 2. reads every row of those resources, the epoch marker, and the
//!    server's clock in one statement (`Dialect::load`);
//! 3. decides, in Rust (`state.rs`), and writes what changed;
//! 4. commits.
//!
//! Every call that reads or writes the holders or places of a resource
//! holds that resource's row lock from step 1 to the commit, so the calls
//! on one resource are serialized by the database, whatever connection or
//! process they come from: the read of step 2 (a new snapshot per
//! statement, read committed) sees everything the previous lock owner
//! committed. Calls on different resources share nothing but the epoch
//! marker, which they only read. A deadlock or serialization failure the
//! database reports rolls the whole call back, and it runs again.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool, Connection as _, Executor, Row as _, Transaction};
use tokio::sync::mpsc::UnboundedSender;

use super::dialect::{Backend, Dialect};
use super::server_notices::Masking;
use super::state::{mode_char, Op, Row, Table};
use super::url::{check_parameters, Server};
use crate::Error;
use errors::{code_of, is_missing_function, is_missing_table, is_not_permitted};
use search_path::{pin_search_path, refuse_this_call, Ambiguous, RefusedNow, REFUSED_NOW};

mod errors;
mod fast;
mod search_path;
mod setup;
mod shape;
pub(super) mod warm;

/// What a call's transaction knows besides the rows: the clock and when
/// the table's epoch began.
#[derive(Debug, Clone, Copy)]
pub(super) struct Epoch {
    /// The server's clock, µs since the Unix epoch.
    pub now_us: i64,
    /// When the table's epoch began (ms on the server's clock): 0 when
    /// the table was made by a locker, else when a locker found it reset.
    pub since_ms: i64,
    /// When the MySQL server last started, ms (0 when unknown, or on
    /// PostgreSQL).
    pub started_ms: i64,
    /// The node's fencing high-water mark, read and locked for a fencing
    /// call (`None` otherwise, or when no token was ever drawn).
    pub mark: Option<i64>,
}

impl Epoch {
    pub(super) fn now_ms(&self) -> i64 {
        self.now_us.div_euclid(1000)
    }
}

/// A failure that the same call may simply run again after: the database
/// rolled it back to break a deadlock or a serialization conflict.
enum Failure {
    Retry(String),
    Fail(Error),
}

pub(super) struct Store {
    pool: AnyPool,
    /// Connections kept between calls, so that none is pinged as it goes
    /// back to the pool (see `warm.rs`): every call and task takes its
    /// connection through [`conn`](Self::conn).
    warm: Arc<warm::Warm>,
    /// Every poll of the driver by this locker's calls and tasks is made
    /// under it, so that a notice the server sends is logged masked (see
    /// `server_notices.rs`).
    pub masking: Masking,
    pub dialect: Dialect,
    /// `scheme://host:port/database`, never the credentials.
    pub endpoint: String,
    /// The server the URL names, to compare; never shown.
    pub server: Server,
    call_timeout: Duration,
    create_tables: bool,
    /// Whether the tables were found (or made) since the latest call that
    /// found them missing: a table dropped under a running locker is
    /// made again by the next call, in a new epoch (so in quarantine).
    ready: AtomicBool,
    /// One setup at a time.
    setting_up: tokio::sync::Mutex<()>,
    /// Whether a setup of this locker found (or made) the tables once.
    found_before: AtomicBool,
    /// The latest server start any connection saw (MySQL), ms.
    started_ms: Arc<AtomicI64>,
    online: AtomicBool,
    /// Why the pool's latest new connection was refused (PostgreSQL's
    /// search path), for the error of a call that found no connection.
    refused: Arc<std::sync::Mutex<Option<String>>>,
    /// The one-round-trip calls this locker may use, found (or made) at
    /// setup.
    fast: std::sync::Mutex<fast::Calls>,
    /// Whether the log said already why some calls take the transaction.
    said_why_no_fast_call: AtomicBool,
    /// The warning that a new epoch begins, at most once a second.
    epoch_warning: crate::locker::throttled::SharedThrottle,
    /// This locker's channel, and where notices for this locker's own
    /// waiters go (replaced when the task that reads them is started
    /// again, on another runtime).
    own: (String, std::sync::Mutex<UnboundedSender<String>>),
}

/// Most times a call runs again after the database broke a deadlock.
const RETRIES: usize = 8;

impl Store {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        url: &str,
        backend: Backend,
        dialect: Dialect,
        pool_size: u32,
        call_timeout: Duration,
        create_tables: bool,
        own: (String, UnboundedSender<String>),
    ) -> Result<Store, Error> {
        static DRIVERS: std::sync::Once = std::sync::Once::new();
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let endpoint = endpoint_of(url);
        let options: AnyConnectOptions = url.parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "not a usable {} URL ({endpoint}); expected {}",
                backend.name(),
                match backend {
                    Backend::Postgres => "postgres://user:password@host:port/database",
                    Backend::MySql => "mysql://user:password@host:port/database",
                }
            ))
        })?;
        // Before any driver reads the URL: the PostgreSQL driver logs a
        // parameter it does not know, key and value, and either may be a
        // piece of a password.
        check_parameters(&options, backend)?;
        // The driver's parse may read the password file and log a
        // malformed line of it whole: within the locker's masking, as its
        // calls are (the caller remembered those lines before).
        let masking = Masking::new(&endpoint);
        let server = masking.run(|| Server::of(&options, backend, &endpoint))?;
        let started_ms = Arc::new(AtomicI64::new(0));
        let setup =
            dialect.session_setup(u64::try_from(call_timeout.as_millis()).unwrap_or(u64::MAX));
        let after = Arc::new(setup);
        let seen = started_ms.clone();
        // PostgreSQL, no schema configured: the schema every connection is
        // kept on (see `pin_search_path`). Without it, a table of the same
        // name made later in a schema earlier on the search path (`"$user"`,
        // say) would take the full transaction's calls elsewhere than the
        // stored routines', which name the schema: two tables, two writers.
        let pin: Arc<std::sync::OnceLock<String>> = Arc::default();
        let refused: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let refusal = refused.clone();
        // PostgreSQL with no schema configured: the table's name, to find
        // which schemas of a connection's search path hold it.
        let unpinned_table = (backend == Backend::Postgres && dialect.tables.schema.is_none())
            .then(|| dialect.tables.name.clone());
        let uptime = dialect.uptime();
        let pool = AnyPoolOptions::new()
            .max_connections(pool_size.max(1))
            .min_connections(0)
            .acquire_timeout(call_timeout)
            // No ping before each call: it would cost a round trip per
            // call. A connection the server dropped fails its call instead,
            // which the coordinator counts as unknown, and is closed.
            .test_before_acquire(false)
            .after_connect(move |conn, _meta| {
                let (after, seen, pin) = (after.clone(), seen.clone(), pin.clone());
                let (table, refusal) = (unpinned_table.clone(), refusal.clone());
                Box::pin(async move {
                    for statement in after.iter() {
                        conn.execute(statement.as_str()).await?;
                    }
                    if let Some(table) = table {
                        // The pool tries again until its timeout and then
                        // says only that; the refusal is kept for the error.
                        let pinned = pin_search_path(conn, &table, &pin).await;
                        *refusal
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) =
                            pinned.as_ref().err().map(|err| match err {
                                sqlx::Error::Configuration(inner) => inner.to_string(),
                                other => other.to_string(),
                            });
                        // A search path with the table in two schemas is
                        // refused again on every try: the call that asked
                        // for this connection is told now, not at its
                        // timeout (see `bounded`).
                        if let Err(sqlx::Error::Configuration(inner)) = &pinned
                            && let Some(ambiguous) = inner.downcast_ref::<Ambiguous>()
                        {
                            refuse_this_call(&ambiguous.0);
                        }
                        pinned?;
                    }
                    if let Some([status, clock]) = uptime {
                        let row = conn.fetch_one(status).await?;
                        let text: String = match row.try_get::<String, _>(1) {
                            Ok(text) => text,
                            Err(_) => {
                                String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(1)?).into_owned()
                            }
                        };
                        let seconds: i64 = text.trim().parse().map_err(|_| {
                            sqlx::Error::Protocol(format!(
                                "an uptime that is not a number: {}",
                                crate::locker::escape_peer_text(&text)
                            ))
                        })?;
                        let now: i64 = sqlx::query_scalar(clock).fetch_one(&mut *conn).await?;
                        seen.fetch_max(
                            super::dialect::latest_start_ms(now, seconds),
                            Ordering::Relaxed,
                        );
                    }
                    Ok(())
                })
            })
            .connect_lazy_with(options);
        let fast = std::sync::Mutex::new(fast::Calls::none());
        Ok(Store {
            pool,
            warm: Arc::default(),
            masking,
            dialect,
            endpoint,
            server,
            call_timeout,
            create_tables,
            ready: AtomicBool::new(false),
            setting_up: tokio::sync::Mutex::new(()),
            found_before: AtomicBool::new(false),
            started_ms,
            online: AtomicBool::new(true),
            refused,
            fast,
            said_why_no_fast_call: AtomicBool::new(false),
            epoch_warning: Default::default(),
            own: (own.0, std::sync::Mutex::new(own.1)),
        })
    }

    pub(super) fn is_online(&self) -> bool {
        self.online.load(Ordering::Relaxed)
    }

    /// The locker's error for `reason`, which may quote the database's
    /// words: escaped, so that a hostile server's text cannot drive the
    /// terminal that shows the error or the log.
    pub(super) fn unavailable(&self, reason: impl Into<String>) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: crate::locker::escape_peer_text(&reason.into()),
        }
    }

    /// The call `f` within the call timeout, with the tables checked once.
    pub(super) async fn bounded<T, F>(&self, f: F) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, Error>>,
    {
        let refused = Arc::new(RefusedNow::default());
        let call = REFUSED_NOW.scope(
            refused.clone(),
            self.masking.scope(async {
                if !self.ready.load(Ordering::Acquire) {
                    let _one = self.setting_up.lock().await;
                    if !self.ready.load(Ordering::Acquire) {
                        self.setup().await?;
                        self.ready.store(true, Ordering::Release);
                        self.found_before.store(true, Ordering::Release);
                    }
                }
                f.await
            }),
        );
        // The pool tries a refused connection again until its acquire
        // timeout, which is the call timeout: without the refusal's own
        // branch the call waited all of it, and then told either the
        // refusal or a timeout, whichever timer fired first. Dropping the
        // call here is what the timeout does too.
        let outcome = tokio::select! {
            biased;
            outcome = tokio::time::timeout(self.call_timeout, call) => match outcome {
                Ok(outcome) => outcome,
                Err(_) => Err(Error::LockerTimeout {
                    endpoint: self.endpoint.clone(),
                    after: self.call_timeout,
                }),
            },
            reason = refused.told() => {
                // Told here: not again by a later call's pool timeout.
                self.refused
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                Err(self.unavailable(format!("a new connection was refused: {reason}")))
            }
        };
        match &outcome {
            Ok(_) => self.online.store(true, Ordering::Relaxed),
            Err(Error::LockerUnavailable { .. } | Error::LockerTimeout { .. }) => {
                self.online.store(false, Ordering::Relaxed)
            }
            Err(_) => {}
        }
        outcome
    }

    /// Runs one call: locks and loads `names`, lets `decide` choose and
    /// record changes, writes them, commits. Runs again (up to
    /// [`RETRIES`] times) when the database broke a deadlock.
    pub(super) async fn call<T>(
        &self,
        names: &[String],
        who: (&str, &str),
        fencing: bool,
        mut decide: impl FnMut(&mut Table, &Epoch) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.bounded(async {
            let mut attempt = 0;
            loop {
                match self.call_once(names, who, fencing, &mut decide).await {
                    Ok(answer) => return Ok(answer),
                    Err(Failure::Fail(err)) => return Err(err),
                    Err(Failure::Retry(why)) if attempt < RETRIES => {
                        attempt += 1;
                        tracing::debug!(locker = %self.endpoint, attempt, "call runs again: {why}");
                        let pause = rand::random::<u64>() % (1 << attempt.min(6));
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                    }
                    Err(Failure::Retry(why)) => {
                        return Err(self.unavailable(format!(
                            "the database rolled the call back {RETRIES} times: {why}"
                        )))
                    }
                }
            }
        })
        .await
    }

    async fn call_once<T>(
        &self,
        names: &[String],
        who: (&str, &str),
        fencing: bool,
        decide: &mut impl FnMut(&mut Table, &Epoch) -> Result<T, Error>,
    ) -> Result<T, Failure> {
        let d = &self.dialect;
        let mut conn = self.conn().await.map_err(|e| self.failure(e))?;
        let mut tx = conn.begin().await.map_err(|e| self.failure(e))?;
        let sql = d.lock_resources(names.len());
        let mut lock = sqlx::query(&sql);
        for name in names {
            lock = lock.bind(name.as_str());
        }
        lock.execute(&mut *tx).await.map_err(|e| self.failure(e))?;
        let sql = d.load(names.len());
        let mut load = sqlx::query(&sql);
        for name in names {
            load = load.bind(name.as_str());
        }
        let rows = load
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.failure(e))?;
        let Some(first) = rows.first() else {
            return Err(Failure::Fail(self.unavailable(
                "the database returned no rows for resources it just locked",
            )));
        };
        let now_us: i64 = first.try_get("now_us").map_err(|e| self.failure(e))?;
        let ident = self.text(first, "ident").map_err(|e| self.failure(e))?;
        let mut parsed = Vec::with_capacity(rows.len());
        let mut marker = None;
        for row in &rows {
            let row = self.row(row).map_err(|e| self.failure(e))?;
            if row.kind == "e" {
                marker = Some((row.deadline, row.ticket));
            } else {
                parsed.push(row);
            }
        }
        let now_ms = now_us.div_euclid(1000);
        let since_ms = match marker {
            Some((since, stored)) if stored == ident => since,
            // The table was reset (a crash, a replica promoted, a backup
            // restored) or another server answers now: a new epoch begins,
            // and with it the quarantine.
            found => {
                // Throttled: a database (or two behind one address) that
                // answers so on every call gets a line a second, counted.
                self.epoch_warning.note(|times| {
                    tracing::warn!(
                        locker = %self.endpoint,
                        times,
                        "the lock table's epoch marker is {}: the database may have forgotten locks it granted; quarantine begins (`times` counts such calls since the last such line)",
                        if found.is_some() { "from another server" } else { "missing" }
                    )
                });
                sqlx::query(&d.put_epoch())
                    .bind(now_ms)
                    .bind(ident.clone())
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.failure(e))?;
                now_ms
            }
        };
        // The mark is locked after the resources, by every fencing call in
        // the same order, so fencing calls queue on it and never deadlock.
        let mark = if fencing {
            sqlx::query_scalar::<_, i64>(&d.read_mark())
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.failure(e))?
        } else {
            None
        };
        let epoch = Epoch {
            now_us,
            since_ms,
            started_ms: self.started_ms.load(Ordering::Relaxed),
            mark,
        };
        let mut table = Table::load(names, &parsed, now_ms);
        let answer = decide(&mut table, &epoch).map_err(Failure::Fail)?;
        let (local, bells) = self.apply(&mut tx, &table.ops, who, now_ms).await?;
        // This locker's own waiters are told before the commit, so that a
        // commit the server makes but this call never hears of (a timeout,
        // a dropped call) still passes their turn on. Safe: a turn is a
        // call of its own, which waits for this transaction's row locks and
        // grants only what the committed state admits; a rolled-back
        // release leaves it nothing to grant.
        self.tell_own(local);
        tx.commit().await.map_err(|e| self.failure(e))?;
        self.warm.keep(conn);
        #[cfg(feature = "mysql")]
        super::doorbell::ring(
            &self.pool,
            &self.warm,
            &self.endpoint,
            &self.masking,
            self.ring_call(),
            bells,
        );
        #[cfg(not(feature = "mysql"))]
        let _ = bells;
        Ok(answer)
    }

    /// Writes `ops` in order; runs of deletes go in one statement. New
    /// holders are written with `who` (owner and source) and granted now.
    async fn apply(
        &self,
        tx: &mut Transaction<'_, Any>,
        ops: &[Op],
        who: (&str, &str),
        now_ms: i64,
    ) -> Result<(Vec<String>, Vec<String>), Failure> {
        let d = &self.dialect;
        let mut local = Vec::new();
        // The channels of other lockers' waiters to wake after the commit
        // (MySQL, which has no notifications: their doorbells).
        let mut bells: Vec<String> = Vec::new();
        let mut i = 0;
        while i < ops.len() {
            let result = match &ops[i] {
                Op::Delete { .. } => {
                    let run: Vec<&Op> = ops[i..]
                        .iter()
                        .take_while(|op| matches!(op, Op::Delete { .. }))
                        .take(100)
                        .collect();
                    let sql = d.delete(run.len());
                    let mut q = sqlx::query(&sql);
                    for op in &run {
                        if let Op::Delete { name, uid, kind } = op {
                            q = q
                                .bind(name.as_str())
                                .bind(uid.as_str())
                                .bind(kind.to_string());
                        }
                    }
                    i += run.len() - 1;
                    q.execute(&mut **tx).await
                }
                Op::Grant {
                    name,
                    uid,
                    mode,
                    deadline,
                    ticket,
                    channel,
                    who: holder,
                } => {
                    let (owner, source) = match holder {
                        Some((owner, source)) => (owner.as_str(), source.as_str()),
                        None => who,
                    };
                    sqlx::query(&d.insert_holder())
                        .bind(name.as_str())
                        .bind(uid.as_str())
                        .bind(mode_char(*mode))
                        .bind(*deadline)
                        .bind(now_ms)
                        .bind(ticket.as_str())
                        .bind(channel.as_str())
                        .bind(owner)
                        .bind(source)
                        .execute(&mut **tx)
                        .await
                }
                Op::Renew {
                    name,
                    uid,
                    deadline,
                    ticket,
                    channel,
                } => {
                    sqlx::query(&d.renew())
                        .bind(*deadline)
                        .bind(ticket.as_str())
                        .bind(channel.as_str())
                        .bind(name.as_str())
                        .bind(uid.as_str())
                        .execute(&mut **tx)
                        .await
                }
                Op::Place {
                    name,
                    uid,
                    mode,
                    deadline,
                    ticket,
                    channel,
                } => {
                    sqlx::query(&d.put_place())
                        .bind(name.as_str())
                        .bind(uid.as_str())
                        .bind(mode_char(*mode))
                        .bind(*deadline)
                        .bind(ticket.as_str())
                        .bind(channel.as_str())
                        .execute(&mut **tx)
                        .await
                }
                Op::Mark { token } => {
                    sqlx::query(&d.put_mark())
                        .bind(*token)
                        .execute(&mut **tx)
                        .await
                }
                Op::Proclaim {
                    name,
                    uid,
                    stamp,
                    value,
                } => {
                    sqlx::query(&d.proclaim())
                        .bind(stamp.as_str())
                        .bind(value.clone())
                        .bind(name.as_str())
                        .bind(uid.as_str())
                        .execute(&mut **tx)
                        .await
                }
                // A notice for this locker's own waiters is acted on here
                // after the commit, without the database; MySQL has no
                // notifications, and its other lockers poll instead.
                Op::Notify { channel, payload } if *channel == self.own.0 => {
                    local.push(payload.clone());
                    i += 1;
                    continue;
                }
                Op::Notify { channel, .. } if d.backend != Backend::Postgres => {
                    if !bells.contains(channel) {
                        bells.push(channel.clone());
                    }
                    i += 1;
                    continue;
                }
                Op::Notify { channel, payload } => {
                    sqlx::query(d.notify())
                        .bind(channel.as_str())
                        .bind(payload.as_str())
                        .execute(&mut **tx)
                        .await
                }
            };
            result.map_err(|e| self.failure(e))?;
            i += 1;
        }
        Ok((local, bells))
    }

    /// Hands `payloads` to the task that acts on this locker's own
    /// notices; nobody reads them once the locker is gone.
    pub(super) fn tell_own(&self, payloads: Vec<String>) {
        if payloads.is_empty() {
            return;
        }
        let sender = self
            .own
            .1
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for payload in payloads {
            let _ = sender.send(payload);
        }
    }

    /// A new channel for this locker's own notices, for a task started
    /// again after the one before ended with its runtime.
    pub(super) fn renew_own(&self) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        *self
            .own
            .1
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = sender;
        receiver
    }

    /// How the pool connects, for a connection of its own (the doorbell).
    #[cfg(feature = "mysql")]
    pub(super) fn connect_options(&self) -> sqlx::any::AnyConnectOptions {
        (*self.pool.connect_options()).clone()
    }

    /// A connection for a call or a task of this locker: one kept from an
    /// earlier call, or the pool's (see `warm.rs`).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before it returns, it holds no connection.
    pub(super) async fn conn(&self) -> Result<PoolConnection<Any>, sqlx::Error> {
        self.warm.take(&self.pool).await
    }

    /// The rows of `query`, on a connection of [`conn`](Self::conn) that
    /// goes to [`done`](Self::done) after.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, it drops its connection (the pool tests it).
    pub(super) async fn fetch_all<'q>(
        &self,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    ) -> Result<Vec<AnyRow>, sqlx::Error> {
        let mut conn = self.conn().await?;
        let rows = query.fetch_all(&mut *conn).await;
        self.done(conn, &rows);
        rows
    }

    /// Hands back `conn` after the work whose `outcome` is given: kept for
    /// the next call when it succeeded; otherwise dropped, and the pool
    /// tests it (a failed call may have left it mid-statement).
    pub(super) fn done<T, E>(&self, conn: PoolConnection<Any>, outcome: &Result<T, E>) {
        if outcome.is_ok() {
            self.warm.keep(conn);
        }
    }

    /// A row of `Dialect::load`.
    pub(super) fn row(&self, row: &AnyRow) -> Result<Row, sqlx::Error> {
        Ok(Row {
            name: self.text(row, "name")?,
            uid: self.text(row, "uid")?,
            kind: row.try_get("kind")?,
            mode: row.try_get("mode")?,
            deadline: row.try_get("deadline")?,
            ticket: row.try_get("ticket")?,
            channel: row.try_get("channel")?,
            stamp: row.try_get("stamp")?,
            value: row.try_get("value")?,
        })
    }

    /// A text column: `text` on PostgreSQL, bytes (`varbinary`, compared
    /// byte for byte) on MySQL.
    pub(super) fn text(&self, row: &AnyRow, column: &str) -> Result<String, sqlx::Error> {
        match self.dialect.backend {
            Backend::Postgres => row.try_get(column),
            Backend::MySql => match row.try_get::<Vec<u8>, _>(column) {
                Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
                Err(_) => row.try_get(column),
            },
        }
    }

    fn failure(&self, err: sqlx::Error) -> Failure {
        if let sqlx::Error::Database(db) = &err {
            let code = code_of(&**db);
            // PostgreSQL: deadlock_detected, serialization_failure;
            // MySQL: ER_LOCK_DEADLOCK (SQLSTATE 40001 too).
            if matches!(&*code, "40P01" | "40001" | "1213") {
                return Failure::Retry(crate::locker::escape_peer_text(db.message()));
            }
        }
        Failure::Fail(self.error(err))
    }
}

/// `url` as logs and errors show it: no user, password or parameters.
pub(super) fn endpoint_of(url: &str) -> String {
    crate::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::setup::check_version;
    use super::*;

    #[test]
    fn endpoints_never_carry_credentials() {
        for (url, shown) in [
            (
                "postgres://lock:s3cret@db.internal:5432/locks?sslmode=require",
                "postgres://db.internal:5432/locks",
            ),
            ("mysql://u:p@ss@10.0.0.1/x", "mysql://10.0.0.1/x"),
            ("mysql://10.0.0.1", "mysql://10.0.0.1"),
            (
                "postgres://locker:s3cr#et@db.internal:5432/locks",
                "postgres://***",
            ),
            ("mysql://l:s3/cr?et@db:3306/x", "mysql://***"),
            (
                "postgres://host/db?user=app&password=Pw@Tail",
                "postgres://***",
            ),
        ] {
            assert_eq!(endpoint_of(url), shown, "{url}");
        }
    }

    #[test]
    fn old_servers_are_refused() {
        assert!(check_version(Backend::Postgres, "120005 PostgreSQL 12.5").is_err());
        assert!(check_version(Backend::Postgres, "150018 PostgreSQL 15.18").is_ok());
        assert!(check_version(Backend::MySql, "10.5.3-MariaDB").is_err());
        assert!(check_version(Backend::MySql, "10.11.6-MariaDB-0+deb12u1").is_ok());
        assert!(check_version(Backend::MySql, "5.7.44").is_err());
        assert!(check_version(Backend::MySql, "8.0.36").is_ok());
    }
}
