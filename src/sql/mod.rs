//! `SqlLocker`: a PostgreSQL, MySQL or MariaDB database as a [`NetLocker`]
//! (features `postgres` and `mysql`), with the rules of
//! [`LocalLocker`](crate::LocalLocker), each call one short transaction.
//!
//! The lock table done right: a `Dsync` over one database (or three, or a
//! database beside lock servers and Redis nodes) gets leases on the
//! database's clock, background refresh that reports a lost lock, fair
//! waiting in ticket order, read/write and multi-resource locks, fencing
//! tokens, leader election, listing and forced unlocks. No connection or
//! transaction is held while a lock is held.
//!
//! # Tables
//!
//! Two tables, created on first use when missing (or by hand, from
//! [`schema`], for applications that may not run DDL):
//!
//! * `<prefix>entries`: one row per resource that anyone holds or waits
//!   for (`kind = 'r'`, the row every call on it locks first), one per
//!   holder (`'h'`: mode, deadline on the database's clock, owner, source,
//!   ticket and channel of a waiter's grant, a leader's proclamation), one
//!   per place in line (`'q'`), and the epoch marker (`'e'`, empty name).
//!   On PostgreSQL it is `UNLOGGED`: commits do not wait for the
//!   write-ahead log, and the table comes back empty after a crash, on a
//!   promoted replica, and from a backup, which is exactly when the locker
//!   must quarantine (see below).
//! * `<prefix>fence`: the node's fencing high-water mark, durable (a logged
//!   table on PostgreSQL, InnoDB on MySQL).
//!
//! # Isolation and locking
//!
//! Every call runs at read committed: it locks the rows of its resources
//! first (an upsert, in sorted order, which creates missing ones), then
//! reads all their rows in one statement, decides, writes and commits.
//! Two calls on a resource are thus serialized by its row lock, whichever
//! process or connection they come from, and the read sees everything the
//! call before committed; calls in sorted order cannot wait in a cycle,
//! and a deadlock the database breaks anyway runs the call again. Expired
//! holders and places are ignored and deleted by whichever call sees them,
//! and a background sweep deletes those on resources nobody calls on: no
//! cron job.
//!
//! # Time
//!
//! Deadlines are the database's clock (`clock_timestamp()`, `SYSDATE(6)`)
//! plus the validity: the clocks of clients never enter into it.
//!
//! # Restarts and failover
//!
//! The entries table holds an epoch marker. When a call finds it missing
//! (the table was reset: a crash of PostgreSQL, whose unlogged table is
//! then emptied, a promoted replica, a restored backup, a `TRUNCATE`), or
//! written by another server (MySQL's `server_id`, which replicas must not
//! share), a new epoch begins and the locker is in quarantine for
//! [`SqlConfig::quarantine`] (raised to the validity), as a restarted lock
//! server is: no answer of it counts, while holders that refresh get their
//! entries back. MySQL and MariaDB also quarantine after every server
//! start (their uptime), since a restore from a backup keeps the marker.
//! Not covered: a MySQL failover to a replica that shares the primary's
//! `server_id` (a misconfiguration replication itself refuses), and rows
//! changed by hand.
//!
//! # Waiting
//!
//! Places in line are ordered by ticket. PostgreSQL pushes a waiter's
//! turn with `NOTIFY` at the commit of the release; MySQL and MariaDB have
//! no notifications, so each locker reads the lines of its waiters every
//! [`SqlConfig::poll_interval`] (one statement without locks per interval,
//! only while it has waiters). The coordinator's re-check is the safety
//! net on both.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{FLOOR_AHEAD_REASON, QUARANTINE_REASON};
use crate::locker::proclamation::{election_resource, Proclamation, WatchArgs, MAX_VALUE_LEN};
use crate::locker::wait::{PushEvent, WaitArgs, WaitReply};
use crate::quorum::fencing::{FENCE_CLOCK_TOLERANCE, FENCE_QUARANTINE};
use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

mod dialect;
mod state;
mod store;
mod url;
mod waits;

pub use dialect::Backend;
use dialect::{Dialect, Tables};
use state::Table;
use store::{Epoch, Store};
use waits::{Waiter, Waits};

/// The longest validity or quarantine used: ten years. Longer ones
/// (`Duration::MAX` included) are taken as this.
const LONGEST: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Longest uid the tables store.
const MAX_UID_LEN: usize = 255;

/// Longest owner and source stored; longer ones are cut (they are only
/// shown in listings).
const MAX_LABEL_LEN: usize = 1024;

/// How a [`SqlLocker`] connects, names its tables and keeps entries.
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
    /// told the same bound for statements and lock waits.
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
/// and `DELETE` on both tables.
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
    Ok(Dialect { backend, tables }.create())
}

/// One SQL database as a locker.
///
/// Build one per database and hand them to a [`Dsync`](crate::Dsync),
/// alone or beside other lockers. One database alone is one locker: the
/// lock is then exactly as available as that database.
///
/// # Cancel safety
///
/// Every `NetLocker` call is cancel safe in the trait's sense: it is one
/// transaction, and a transaction dropped before its commit is rolled
/// back, so a dropped call was applied entirely or not at all. The
/// coordinator counts such a call as unknown and unlocks its uid.
///
/// ```no_run
/// use std::sync::Arc;
/// use quorum_lock::sql::{SqlConfig, SqlLocker};
/// use quorum_lock::{Dsync, NetLocker};
///
/// # async fn run() -> Result<(), quorum_lock::Error> {
/// let db = SqlLocker::connect("postgres://locks:secret@db.internal/app", SqlConfig::default()).await?;
/// let ds = Dsync::builder(vec![Arc::new(db) as Arc<dyn NetLocker>]).build()?;
/// let guard = ds.rw_mutex(["invoices/2026-11"])?.lock().await?;
/// // ... the work the lock protects ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
pub struct SqlLocker {
    shared: Arc<Shared>,
    tasks: Mutex<Tasks>,
}

#[derive(Default)]
struct Tasks {
    poller: Option<JoinHandle<()>>,
    listener: Option<JoinHandle<()>>,
    /// The notices this locker's own calls leave for its own waiters,
    /// until the task that acts on them starts.
    local: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
    local_task: Option<JoinHandle<()>>,
}

struct Shared {
    store: Store,
    config: SqlConfig,
    /// The URL, for the `LISTEN` connection (PostgreSQL); never shown.
    url: String,
    /// This locker's notification channel.
    channel: String,
    waits: Waits,
    /// Whether the `LISTEN` connection listens now (PostgreSQL).
    listening: tokio::sync::watch::Sender<bool>,
}

impl SqlLocker {
    /// A locker for the database at `url`, connected on first use.
    ///
    /// `url` is `postgres://user:password@host:port/database` (or
    /// `postgresql://`), or `mysql://…` (or `mariadb://…`), with the
    /// driver's parameters, such as `sslmode=verify-full&sslrootcert=ca.pem`
    /// or `ssl-mode=VERIFY_IDENTITY&ssl-ca=ca.pem` for TLS. Nothing is sent
    /// yet: a database that cannot be reached counts as a locker that does
    /// not grant until it can. Use [`connect`](Self::connect) to find out
    /// at once.
    ///
    /// A URL with a query parameter the driver does not understand is
    /// refused, naming the parameter by its position only: it may be a piece
    /// of a password (an unencoded `&` in `password=…`).
    pub fn new(url: &str, config: SqlConfig) -> Result<SqlLocker, Error> {
        let backend = Backend::of_url(url).ok_or_else(|| {
            let scheme = url.split_once("://").map_or("", |(s, _)| s);
            Error::InvalidArgument(format!(
                "{} is not a database URL this build supports: use postgres:// (feature \
                 \"postgres\") or mysql:// (feature \"mysql\")",
                if scheme.is_empty() {
                    "a URL without a scheme".to_owned()
                } else {
                    format!("scheme {scheme:?}")
                }
            ))
        })?;
        if config.validity.is_zero() {
            return Err(Error::invalid("a SqlLocker needs a validity above zero"));
        }
        if config.call_timeout.is_zero() {
            return Err(Error::invalid(
                "a SqlLocker needs a call timeout above zero",
            ));
        }
        if config.poll_interval.is_zero() {
            return Err(Error::invalid(
                "a SqlLocker needs a poll interval above zero",
            ));
        }
        let tables = Tables::new(backend, config.schema.as_deref(), &config.table_prefix)?;
        let dialect = Dialect { backend, tables };
        let channel = format!(
            "{}w{}",
            config.table_prefix,
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        );
        let (notices, local) = tokio::sync::mpsc::unbounded_channel();
        let store = Store::new(
            url,
            backend,
            dialect,
            config.pool_size,
            config.call_timeout.min(LONGEST),
            config.create_tables,
            (channel.clone(), notices),
        )?;
        Ok(SqlLocker {
            shared: Arc::new(Shared {
                store,
                config,
                url: url.to_owned(),
                channel,
                waits: Waits::default(),
                listening: tokio::sync::watch::Sender::new(false),
            }),
            tasks: Mutex::new(Tasks {
                local: Some(local),
                ..Tasks::default()
            }),
        })
    }

    /// Like [`new`](Self::new), then connects, checks the server's version
    /// and creates the tables if they are missing (when allowed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the tables are created in one transaction on
    /// PostgreSQL; on MySQL a creation cut short leaves the marker out,
    /// which costs one quarantine, never a lock.
    pub async fn connect(url: &str, config: SqlConfig) -> Result<SqlLocker, Error> {
        let locker = SqlLocker::new(url, config)?;
        locker.shared.store.bounded(async { Ok(()) }).await?;
        Ok(locker)
    }

    /// Whether `other` talks to the same database server as this locker:
    /// the same host (as written, without case: not resolved, so `localhost`
    /// and `127.0.0.1` differ) or socket, and port, as the driver reads them
    /// from the URL, its query parameters (`host=`, `port=`, `socket=`)
    /// included. Two lockers on one server, even with other databases or
    /// users, are one vote: a [`Dsync`](crate::Dsync) over both would let
    /// that one server make a quorum alone. The address is compared, never
    /// shown: a URL may hold a secret in any part.
    ///
    /// ```no_run
    /// use quorum_lock::sql::{SqlConfig, SqlLocker};
    ///
    /// # fn run() -> Result<(), quorum_lock::Error> {
    /// let a = SqlLocker::new("postgres://app@db.internal/locks", SqlConfig::default())?;
    /// let b = SqlLocker::new("postgres://db.internal:5432/other", SqlConfig::default())?;
    /// assert!(a.same_server(&b));
    /// # Ok(())
    /// # }
    /// ```
    pub fn same_server(&self, other: &SqlLocker) -> bool {
        self.shared.store.server == other.shared.store.server
    }

    /// Which database this locker talks to.
    pub fn backend(&self) -> Backend {
        self.shared.store.dialect.backend
    }

    /// How much longer this locker is in quarantine after a new epoch of
    /// its table or a server start (see the module docs); `None` when it
    /// grants.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it reads, and at most writes a new epoch marker in
    /// one transaction.
    pub async fn quarantine_left(&self) -> Result<Option<Duration>, Error> {
        let shared = &self.shared;
        let probe = [String::from("\u{1}quarantine-probe")];
        shared
            .store
            .call(&probe, ("", ""), false, |table, epoch| {
                table.finish();
                Ok(shared.quarantine(epoch, false))
            })
            .await
    }

    /// Starts the background work once a runtime is at hand: the poller
    /// (waiters on MySQL, watches, the sweep of expired rows), and on
    /// PostgreSQL the `LISTEN` connection when `listen`.
    fn start(&self, listen: bool) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if tasks.poller.as_ref().is_none_or(JoinHandle::is_finished) {
            tasks.poller = Some(tokio::spawn(poll(Arc::downgrade(&self.shared))));
        }
        let local = match tasks.local.take() {
            Some(local) => Some(local),
            // The task before ended (its runtime went): a new channel.
            None if tasks
                .local_task
                .as_ref()
                .is_none_or(JoinHandle::is_finished) =>
            {
                Some(self.shared.store.renew_own())
            }
            None => None,
        };
        if let Some(mut local) = local {
            let shared = Arc::downgrade(&self.shared);
            tasks.local_task = Some(tokio::spawn(async move {
                while let Some(payload) = local.recv().await {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    tokio::spawn(async move { on_notice(&shared, &payload).await });
                }
            }));
        }
        #[cfg(feature = "postgres")]
        if listen
            && self.backend() == Backend::Postgres
            && tasks.listener.as_ref().is_none_or(JoinHandle::is_finished)
        {
            tasks.listener = Some(tokio::spawn(listener::listen(Arc::downgrade(&self.shared))));
        }
        let _ = listen;
    }
}

impl Drop for SqlLocker {
    fn drop(&mut self) {
        let tasks = self.tasks.get_mut().unwrap_or_else(PoisonError::into_inner);
        for task in [
            tasks.poller.take(),
            tasks.listener.take(),
            tasks.local_task.take(),
        ]
        .into_iter()
        .flatten()
        {
            task.abort();
        }
    }
}

impl std::fmt::Debug for SqlLocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlLocker")
            .field("endpoint", &self.shared.store.endpoint)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.min(LONGEST).as_millis())
        .unwrap_or(i64::MAX)
        .max(1)
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A ticket as 40 digits, so that tickets compare as strings in the order
/// of the numbers.
fn ticket_text(wait: &WaitArgs) -> String {
    format!("{:020}{:020}", wait.ticket.at, wait.ticket.tiebreak)
}

/// A proclamation's term and seq as 40 digits.
fn stamp(p: &Proclamation) -> String {
    format!("{:020}{:020}", p.term, p.seq)
}

/// How a waiting call ended.
enum Waited {
    Granted,
    Queued,
    Refused,
    /// Queued, and the uid holds a grant an older waiter is queued behind.
    Wounded,
}

impl Shared {
    fn endpoint(&self) -> &str {
        &self.store.endpoint
    }

    /// Checks `args` as every locker must: resources within the limits,
    /// a uid unless `any_uid`, and text a listing can show.
    fn checked(args: &LockArgs, any_uid: bool) -> Result<Vec<String>, Error> {
        args.validate_resources()?;
        if !any_uid && args.uid.is_empty() {
            return Err(Error::InvalidArgument("empty lock uid".into()));
        }
        if args.uid.len() > MAX_UID_LEN {
            return Err(Error::invalid(format!(
                "a lock uid of {} bytes; a SqlLocker stores at most {MAX_UID_LEN}",
                args.uid.len()
            )));
        }
        args.validate_text()?;
        let mut names = args.resources.to_vec();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn who(args: &LockArgs) -> (&str, &str) {
        (
            cut(&args.owner, MAX_LABEL_LEN),
            cut(&args.source, MAX_LABEL_LEN),
        )
    }

    fn validity_ms(&self) -> i64 {
        ms(self.config.validity)
    }

    /// How long the quarantine `fencing` (or that of grants) has left at
    /// `epoch`, if any: from the later of the table's epoch and the
    /// server's start.
    fn quarantine(&self, epoch: &Epoch, fencing: bool) -> Option<Duration> {
        let configured = match self.config.quarantine {
            zero if zero.is_zero() => return None,
            q => q.max(self.config.validity).min(LONGEST),
        };
        let quarantine = if fencing {
            configured.max(FENCE_QUARANTINE)
        } else {
            configured
        };
        let end = epoch
            .since_ms
            .max(epoch.started_ms)
            .saturating_add(ms(quarantine));
        let now = epoch.now_ms();
        (now < end).then(|| Duration::from_millis(u64::try_from(end - now).unwrap_or(u64::MAX)))
    }

    /// The quarantine of grants in ms, as the fast path checks it: 0 for
    /// none.
    fn quarantine_ms(&self) -> i64 {
        match self.config.quarantine {
            zero if zero.is_zero() => 0,
            q => ms(q.max(self.config.validity)),
        }
    }

    /// The fast path of a grant of one free resource; whether it granted.
    async fn fast_grant(
        &self,
        names: &[String],
        args: &LockArgs,
        mode: LockMode,
        wait: (&str, &str),
    ) -> Result<bool, Error> {
        let [name] = names else {
            return Ok(false);
        };
        self.store
            .fast_grant(
                name,
                &args.uid,
                state::mode_char(mode),
                self.validity_ms(),
                self.quarantine_ms(),
                wait,
                Self::who(args),
            )
            .await
    }

    fn quarantined(&self, left: Duration) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint().to_owned(),
            reason: format!(
                "the database's lock table began a new epoch or the server started recently, \
                 and it may have lost locks it granted; {QUARANTINE_REASON} for another {left:?}"
            ),
        }
    }

    async fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        if self.fast_grant(&names, args, mode, ("", "")).await? {
            return Ok(true);
        }
        let validity = self.validity_ms();
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let deadline = t.now + validity;
                let answer = if let Some(left) = self.quarantine(epoch, false) {
                    t.refresh_held(uid, deadline);
                    Err(self.quarantined(left))
                } else if (0..t.resources.len()).any(|i| {
                    t.resources[i].blocked(uid, mode)
                        || t.resources[i].queued_before(uid, mode, None)
                }) {
                    Ok(false)
                } else {
                    for i in 0..t.resources.len() {
                        t.grant(i, uid, mode, deadline, "", "");
                    }
                    Ok(true)
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    /// A waiting lock call, or (`turn`) a turn taken for a waiter after a
    /// notice said it may have come.
    async fn wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: &str,
        place_ttl: Duration,
        channel: &str,
        turn: bool,
    ) -> Result<Waited, Error> {
        let names = Self::checked(args, false)?;
        if !turn
            && self
                .fast_grant(&names, args, mode, (ticket, channel))
                .await?
        {
            return Ok(Waited::Granted);
        }
        let validity = self.validity_ms();
        let ttl = ms(place_ttl);
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let n = t.resources.len();
                // The same waiter asking again under a new uid: its old place goes.
                for i in 0..n {
                    let stale: Vec<String> = t.resources[i]
                        .places
                        .iter()
                        .filter(|(other, p)| other.as_str() != uid && p.ticket == ticket)
                        .map(|(other, _)| other.clone())
                        .collect();
                    for other in stale {
                        t.unplace(i, &other);
                    }
                }
                let placed = t.resources.iter().all(|r| r.places.contains_key(uid));
                let admitted = t
                    .resources
                    .iter()
                    .all(|r| !r.blocked(uid, mode) && !r.queued_before(uid, mode, Some(ticket)));
                let holds = t.holds_all(uid, Some(mode));
                let deadline = t.now + validity;
                let answer = if turn && (holds || !placed) {
                    Ok(Waited::Refused)
                } else if let Some(left) = self.quarantine(epoch, false) {
                    t.refresh_held(uid, deadline);
                    Err(self.quarantined(left))
                } else if admitted {
                    for i in 0..n {
                        t.grant(i, uid, mode, deadline, ticket, channel);
                        t.unplace(i, uid);
                    }
                    Ok(Waited::Granted)
                } else if turn {
                    Ok(Waited::Queued)
                } else {
                    let place_deadline = t.now + ttl.min(validity);
                    let mut wounded = false;
                    for i in 0..n {
                        // What the uid holds already is renewed: the answer
                        // counts as one. A grant that an older waiter is
                        // queued behind is a wound, told in the answer
                        // whether or not a notice reached the waiter.
                        if t.resources[i].holders.contains_key(uid) {
                            let held = t.resources[i].holders[uid].mode;
                            t.grant(i, uid, held, deadline, "", "");
                            if t.resources[i].queued_before(uid, mode, Some(ticket)) {
                                wounded = true;
                            }
                        }
                        t.place(i, uid, mode, place_deadline, ticket, channel);
                        t.wound(i, mode, ticket);
                    }
                    Ok(if wounded {
                        Waited::Wounded
                    } else if channel.is_empty() {
                        Waited::Refused
                    } else {
                        Waited::Queued
                    })
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    /// Asks again for `waiter` after a notice said its turn may have come;
    /// whether it was granted.
    async fn take_turn(&self, waiter: &Waiter) -> Result<bool, Error> {
        let waited = self
            .wait(
                &waiter.args,
                waiter.mode,
                &waiter.ticket,
                waiter.place_ttl,
                &self.channel,
                true,
            )
            .await?;
        Ok(matches!(waited, Waited::Granted))
    }

    async fn release(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        self.waits.forget(&args.uid);
        let uid = &*args.uid;
        self.store
            .call(&names, ("", ""), false, |t, _| {
                let mut removed = false;
                for i in 0..t.resources.len() {
                    if t.resources[i].mode() == Some(mode) && t.release(i, uid) {
                        removed = true;
                    }
                    t.unplace(i, uid);
                }
                t.finish();
                Ok(removed)
            })
            .await
    }

    async fn refresh(&self, args: &LockArgs, mode: Option<LockMode>) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        let validity = self.validity_ms();
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let deadline = t.now + validity;
                let missing = !t.holds_all(uid, None);
                t.refresh_held(uid, deadline);
                let answer = match self.quarantine(epoch, false) {
                    None => Ok(!missing),
                    Some(left) => {
                        // Re-creates the missing entries where the
                        // resources are free for them (all or none), so
                        // the holder has them back when the quarantine
                        // ends; the answer counts for nothing meanwhile.
                        if let (true, Some(mode)) = (missing, mode) {
                            let free = t
                                .resources
                                .iter()
                                .all(|r| r.holders.contains_key(uid) || !r.blocked(uid, mode));
                            if free {
                                for i in 0..t.resources.len() {
                                    if !t.resources[i].holders.contains_key(uid) {
                                        t.grant(i, uid, mode, deadline, "", "");
                                    }
                                }
                            }
                        }
                        Err(self.quarantined(left))
                    }
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    async fn force(&self, names: &[String], uid: &str) -> Result<bool, Error> {
        self.store
            .call(names, ("", ""), false, |t, _| {
                let mut removed = false;
                for i in 0..t.resources.len() {
                    if uid.is_empty() {
                        let holders: Vec<String> = t.resources[i].holders.keys().cloned().collect();
                        for holder in holders {
                            removed |= t.release(i, &holder);
                        }
                    } else {
                        removed |= t.release(i, uid);
                        t.unplace(i, uid);
                    }
                }
                t.finish();
                Ok(removed)
            })
            .await
    }

    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let names = Self::checked(args, false)?;
        let uid = &*args.uid;
        let endpoint = self.endpoint();
        self.store
            .call(&names, ("", ""), true, |t, epoch| {
                let answer = if let Some(left) = self.quarantine(epoch, true) {
                    Err(self.quarantined(left))
                } else if !t.holds_all(uid, Some(mode)) {
                    Ok(None)
                } else {
                    let now_ns = u64::try_from(epoch.now_us)
                        .unwrap_or(0)
                        .saturating_mul(1000);
                    let limit = now_ns.saturating_add(
                        u64::try_from(FENCE_CLOCK_TOLERANCE.as_nanos()).unwrap_or(u64::MAX),
                    );
                    let mark = epoch.mark.map(|m| u64::try_from(m).unwrap_or(0));
                    if floor > limit {
                        Err(Error::InvalidArgument(format!(
                            "fencing floor {floor} is {FLOOR_AHEAD_REASON} database {endpoint} by \
                             more than {FENCE_CLOCK_TOLERANCE:?} (its clock plus that is {limit} \
                             ns): clocks out of sync, or a client sent a bogus floor"
                        )))
                    } else {
                        let token = now_ns
                            .max(floor)
                            .max(mark.map_or(0, |m| m.saturating_add(1)));
                        match i64::try_from(token) {
                            Ok(stored) => {
                                t.ops.push(state::Op::Mark { token: stored });
                                Ok(Some(token))
                            }
                            Err(_) => Err(Error::InvalidArgument(format!(
                                "the fencing counter of database {endpoint} would pass \
                                 i64::MAX, the most its column holds"
                            ))),
                        }
                    }
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    async fn proclaim(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        let uid = &*args.uid;
        let new = stamp(p);
        self.store
            .call(&names, ("", ""), false, |t, epoch| {
                let r = &t.resources[0];
                let mut stored = false;
                if r.mode() == Some(LockMode::Write) {
                    if let Some(holder) = r.holders.get(uid) {
                        stored = true;
                        if holder.stamp.is_empty() || holder.stamp < new {
                            let op = state::Op::Proclaim {
                                name: r.name.clone(),
                                uid: uid.to_owned(),
                                stamp: new.clone(),
                                value: p.value.to_vec(),
                            };
                            t.ops.push(op);
                        }
                    }
                }
                t.finish();
                Ok(match self.quarantine(epoch, false) {
                    Some(left) => Err(self.quarantined(left)),
                    None => Ok(stored),
                })
            })
            .await?
    }

    /// The leader of `names[0]`: its uid and proclamation.
    async fn read_leader(&self, names: &[String]) -> Result<Option<(String, Proclamation)>, Error> {
        let endpoint = self.endpoint();
        self.store
            .call(names, ("", ""), false, |t, epoch| {
                let found = t.resources[0].leader().map(|(uid, h)| {
                    (
                        uid.to_owned(),
                        h.stamp.clone(),
                        h.value.clone().unwrap_or_default(),
                    )
                });
                t.finish();
                if let Some(left) = self.quarantine(epoch, false) {
                    return Ok(Err(self.quarantined(left)));
                }
                let Some((uid, stamp, value)) = found else {
                    return Ok(Ok(None));
                };
                Ok(unstamp(&stamp, &value)
                    .map(|p| Some((uid, p)))
                    .ok_or_else(|| Error::LockerUnavailable {
                        endpoint: endpoint.to_owned(),
                        reason: "the table holds a proclamation this library cannot read; was \
                                 the row written by hand?"
                            .into(),
                    }))
            })
            .await?
    }

    async fn list(&self) -> Result<Vec<LockInfo>, Error> {
        let store = &self.store;
        let validity = self.config.validity.min(LONGEST);
        store
            .bounded(async {
                let rows = sqlx::query(&store.dialect.list())
                    .fetch_all(store.pool())
                    .await
                    .map_err(|e| store.error(e))?;
                let here = Instant::now();
                let mut infos = Vec::with_capacity(rows.len());
                for row in &rows {
                    use sqlx::Row as _;
                    let get = |column: &str| store.text(row, column).map_err(|e| store.error(e));
                    let number = |column: &str| -> Result<i64, Error> {
                        row.try_get::<i64, _>(column).map_err(|e| store.error(e))
                    };
                    let (now_ms, deadline) =
                        (number("now_us")?.div_euclid(1000), number("deadline")?);
                    if deadline <= now_ms {
                        continue;
                    }
                    let at = |ms: i64| {
                        let ago = u64::try_from(now_ms.saturating_sub(ms)).unwrap_or(0);
                        here.checked_sub(Duration::from_millis(ago)).unwrap_or(here)
                    };
                    let mode: String = row.try_get("mode").map_err(|e| store.error(e))?;
                    let refreshed = deadline.saturating_sub(ms(validity));
                    infos.push(LockInfo {
                        resource: get("name")?,
                        uid: get("uid")?,
                        mode: if mode == "w" {
                            LockMode::Write
                        } else {
                            LockMode::Read
                        },
                        owner: get("owner")?,
                        source: get("source")?,
                        acquired: at(number("granted")?),
                        refreshed: at(refreshed),
                    });
                }
                infos.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
                Ok(infos)
            })
            .await
    }

    /// The names `uid` holds or waits on.
    async fn names_of(&self, uid: &str) -> Result<Vec<String>, Error> {
        let store = &self.store;
        store
            .bounded(async {
                let rows = sqlx::query(&store.dialect.names_of_uid())
                    .bind(uid)
                    .fetch_all(store.pool())
                    .await
                    .map_err(|e| store.error(e))?;
                rows.iter()
                    .map(|row| store.text(row, "name").map_err(|e| store.error(e)))
                    .collect()
            })
            .await
    }
}

/// A stored proclamation, or `None` when it is not one [`stamp`] wrote.
fn unstamp(stamp: &str, value: &[u8]) -> Option<Proclamation> {
    if stamp.len() != 40
        || !stamp.bytes().all(|b| b.is_ascii_digit())
        || value.len() > MAX_VALUE_LEN
    {
        return None;
    }
    let term = stamp[..20].parse().ok()?;
    let seq = stamp[20..].parse().ok()?;
    Proclamation::new(term, seq, value).ok()
}

/// The background work of one locker, until it is dropped: every poll
/// interval, the lines of the waiters (MySQL) and the leaders of the
/// watched resources; every validity (at most a minute), a sweep of
/// expired rows that no call has deleted.
async fn poll(shared: Weak<Shared>) {
    let interval = match shared.upgrade() {
        Some(s) => s.config.poll_interval,
        None => return,
    };
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep = Instant::now();
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let poll_waiters = shared.store.dialect.backend == Backend::MySql;
        let names = shared.waits.watched_names(poll_waiters);
        if !names.is_empty() {
            if let Err(err) = look(&shared, &names, poll_waiters).await {
                tracing::debug!(locker = %shared.endpoint(), "poll failed: {err}");
            }
        }
        let sweep_every = shared
            .config
            .validity
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        if last_sweep.elapsed() >= sweep_every {
            last_sweep = Instant::now();
            if let Err(err) = sweep(&shared).await {
                tracing::debug!(locker = %shared.endpoint(), "sweep failed: {err}");
            }
        }
    }
}

/// Reads the rows of `names` (no locks) and acts as the notices would: the
/// turns and wounds of this locker's waiters (when `waiters`), and the
/// leaders of its watches.
async fn look(shared: &Arc<Shared>, names: &[String], waiters: bool) -> Result<(), Error> {
    let store = &shared.store;
    for batch in names.chunks(100) {
        let sql = store.dialect.load(batch.len());
        let rows = store
            .bounded(async {
                let mut q = sqlx::query(&sql);
                for name in batch {
                    q = q.bind(name.as_str());
                }
                q.fetch_all(store.pool()).await.map_err(|e| store.error(e))
            })
            .await?;
        let Some(first) = rows.first() else { continue };
        use sqlx::Row as _;
        let now_ms = first
            .try_get::<i64, _>("now_us")
            .map_err(|e| store.error(e))?
            .div_euclid(1000);
        let parsed: Vec<state::Row> = rows.iter().filter_map(|row| store.row(row).ok()).collect();
        let table = Table::load(batch, &parsed, now_ms);
        for r in &table.resources {
            shared.waits.leader_is(
                &r.name,
                &r.leader().map(|(uid, h)| (uid.to_owned(), h.stamp.clone())),
            );
            if !waiters {
                continue;
            }
            let ours: Vec<String> = r
                .turns()
                .into_iter()
                .filter(|(channel, _)| *channel == shared.channel)
                .map(|(_, uid)| uid)
                .collect();
            for waiter in shared.waits.waiters_among(&ours) {
                turn(shared, &waiter).await;
            }
            // Younger grants of this locker's waiters that an older place
            // waits behind: wounded once each.
            let wounded: Vec<String> = r
                .holders
                .iter()
                .filter(|(uid, h)| {
                    h.channel == shared.channel
                        && !h.ticket.is_empty()
                        && r.queued_before(uid, h.mode, Some(&h.ticket))
                })
                .map(|(uid, _)| uid.clone())
                .collect();
            for waiter in shared.waits.waiters_among(&wounded) {
                if shared.waits.first_wound(&waiter.args.uid) {
                    waiter.wake.notify(&waiter.args.uid, PushEvent::Wounded);
                }
            }
        }
    }
    Ok(())
}

/// Takes `waiter`'s turn, and pushes its grant when it was made.
async fn turn(shared: &Arc<Shared>, waiter: &Waiter) {
    match shared.take_turn(waiter).await {
        Ok(true) => waiter.wake.notify(&waiter.args.uid, PushEvent::Granted),
        Ok(false) => {}
        Err(err) => {
            tracing::debug!(locker = %shared.endpoint(), uid = %waiter.args.uid, "turn not taken: {err}")
        }
    }
}

/// Deletes expired rows on resources no call touched since they expired,
/// through the same call every other uses (so their lines move on too):
/// up to ten batches of 100 names per sweep, going on past a name whose
/// call fails.
async fn sweep(shared: &Arc<Shared>) -> Result<(), Error> {
    let store = &shared.store;
    for _ in 0..10 {
        let names = store
            .bounded(async {
                let rows = sqlx::query(&store.dialect.expired_names())
                    .fetch_all(store.pool())
                    .await
                    .map_err(|e| store.error(e))?;
                rows.iter()
                    .map(|row| store.text(row, "name").map_err(|e| store.error(e)))
                    .collect::<Result<Vec<String>, Error>>()
            })
            .await?;
        let mut failed = 0;
        for name in &names {
            let swept = store
                .call(std::slice::from_ref(name), ("", ""), false, |t, _| {
                    t.finish();
                    Ok(())
                })
                .await;
            if let Err(err) = swept {
                failed += 1;
                tracing::debug!(locker = %shared.endpoint(), "sweep of one name failed: {err}");
            }
        }
        // A short batch was the last; a batch of failures would only come
        // back the same.
        if names.len() < 100 || failed == names.len() {
            break;
        }
    }
    Ok(())
}

/// Acts on a notice of this locker's channel: `T<uid>` or `W<uid>`.
async fn on_notice(shared: &Arc<Shared>, payload: &str) {
    let mut chars = payload.chars();
    let (Some(kind), uid) = (chars.next(), chars.as_str()) else {
        return;
    };
    let Some(waiter) = shared.waits.waiter(uid) else {
        return;
    };
    match kind {
        'W' => waiter.wake.notify(uid, PushEvent::Wounded),
        'T' => turn(shared, &waiter).await,
        _ => {}
    }
}

#[cfg(feature = "postgres")]
mod listener {
    //! The `LISTEN` connection of a PostgreSQL locker.
    use super::*;

    /// Listens on the locker's channel until it is dropped, reconnecting
    /// after a pause when the connection fails; notices sent while it is
    /// down are lost, and the waiters' re-checks stand in for them.
    pub(super) async fn listen(shared: Weak<Shared>) {
        loop {
            let Some((url, channel)) = shared.upgrade().map(|s| (s.url.clone(), s.channel.clone()))
            else {
                return;
            };
            match sqlx::postgres::PgListener::connect(&url).await {
                Ok(mut listener) => {
                    if listener.listen(&channel).await.is_ok() {
                        if let Some(s) = shared.upgrade() {
                            s.listening.send_replace(true);
                        }
                        while let Ok(Some(notice)) = listener.try_recv().await {
                            let Some(shared) = shared.upgrade() else {
                                return;
                            };
                            let payload = notice.payload().to_owned();
                            // A turn is a call of its own: run it apart,
                            // so that notices keep flowing.
                            tokio::spawn(async move { on_notice(&shared, &payload).await });
                        }
                    }
                }
                Err(err) => {
                    if let Some(s) = shared.upgrade() {
                        tracing::debug!(locker = %s.endpoint(), "LISTEN connection failed: {}", s.store.error(err));
                    }
                }
            }
            if let Some(s) = shared.upgrade() {
                s.listening.send_replace(false);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[async_trait]
impl NetLocker for SqlLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.start(false);
        self.shared.grant(args, LockMode::Write).await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.start(false);
        self.shared.grant(args, LockMode::Read).await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.release(args, LockMode::Write).await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.release(args, LockMode::Read).await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.shared.refresh(args, None).await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.shared.refresh(args, Some(mode)).await
    }

    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        Shared::checked(args, false)?;
        if wait.place_ttl.is_zero() {
            return Err(Error::invalid(
                "a place in line needs a place_ttl above zero",
            ));
        }
        self.start(wait.wake.is_some());
        let ticket = ticket_text(wait);
        let shared = &self.shared;
        if wait.wake.is_some() && self.backend() == Backend::Postgres {
            // The first wait waits (a call timeout at most) for the LISTEN
            // connection, so that its first turn is not sent to nobody;
            // while it is down, the waiter's re-check stands in for it.
            let mut listening = shared.listening.subscribe();
            let _ = tokio::time::timeout(shared.config.call_timeout, listening.wait_for(|up| *up))
                .await;
        }
        // A waiter with a wake always names this locker's channel, whether
        // or not the notices arrive: a lost one costs a re-check. Only a
        // reservation (no wake) names none.
        let channel = match &wait.wake {
            Some(wake) => {
                // Kept no longer than an entry: the place itself never is.
                let place_ttl = wait.place_ttl.min(shared.config.validity);
                shared
                    .waits
                    .register(args, mode, ticket.clone(), place_ttl, wake.clone());
                shared.channel.as_str()
            }
            None => "",
        };
        let waited = shared
            .wait(args, mode, &ticket, wait.place_ttl, channel, false)
            .await?;
        Ok(match (waited, &wait.wake) {
            (Waited::Granted, _) => WaitReply::Granted,
            // Wounded: delivered through the waiter's own wake, as if it
            // had been pushed, so a lost notice is made up at the re-check.
            (Waited::Wounded, Some(wake)) => {
                wake.notify(&args.uid, PushEvent::Wounded);
                WaitReply::Queued
            }
            (Waited::Queued, _) => WaitReply::Queued,
            _ => WaitReply::Refused,
        })
    }

    fn queues(&self) -> bool {
        true
    }

    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.shared.fence(args, mode, floor).await
    }

    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        election_resource(args)?;
        proclamation.validate()?;
        self.shared.proclaim(args, proclamation).await
    }

    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let names = Shared::checked(args, false)?;
        election_resource(args)?;
        let shared = &self.shared;
        let registered = match watch {
            Some(watch) => {
                self.start(false);
                Some(shared.waits.watch(&names[0], &args.uid, watch)?)
            }
            None => None,
        };
        let read = shared.read_leader(&names).await;
        if let Some(id) = registered {
            let seen = match &read {
                Ok(found) => Some(found.as_ref().map(|(uid, p)| (uid.clone(), stamp(p)))),
                Err(_) => None,
            };
            shared.waits.settle(&names[0], id, seen);
        }
        read.map(|found| found.map(|(_, p)| p))
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        let shared = &self.shared;
        match (args.uid.is_empty(), args.resources.is_empty()) {
            (true, true) => Err(Error::invalid(
                "force_unlock needs a uid, resource names, or both",
            )),
            (true, false) => {
                let names = Shared::checked(args, true)?;
                shared.force(&names, "").await
            }
            (false, false) => {
                let names = Shared::checked(args, false)?;
                shared.waits.forget(&args.uid);
                shared.force(&names, &args.uid).await
            }
            (false, true) => {
                args.validate_text()?;
                if args.uid.len() > MAX_UID_LEN {
                    return Ok(false);
                }
                shared.waits.forget(&args.uid);
                let mut removed = false;
                let mut names = shared.names_of(&args.uid).await?;
                names.sort();
                for batch in names.chunks(100) {
                    removed |= shared.force(batch, &args.uid).await?;
                }
                Ok(removed)
            }
        }
    }

    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        self.shared.list().await
    }

    fn endpoint(&self) -> String {
        self.shared.endpoint().to_owned()
    }

    fn is_online(&self) -> bool {
        self.shared.store.is_online()
    }

    fn is_local(&self) -> bool {
        false
    }

    fn validity(&self) -> Option<Duration> {
        Some(self.shared.config.validity.min(LONGEST))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DDL that docs/sql.md shows for teams that create the tables by
    /// hand is exactly what the locker runs.
    #[test]
    fn the_documented_ddl_is_the_ddl_the_locker_runs() {
        let doc = include_str!("../../docs/sql.md");
        let backends = [
            #[cfg(feature = "postgres")]
            Backend::Postgres,
            #[cfg(feature = "mysql")]
            Backend::MySql,
        ];
        for backend in backends {
            for statement in schema(backend, &SqlConfig::default()).expect("the default config") {
                assert!(
                    doc.contains(&format!("{statement};")),
                    "docs/sql.md lacks this {} statement:\n{statement};",
                    backend.name()
                );
            }
        }
    }

    #[test]
    fn prefixes_and_schemas_that_are_not_plain_identifiers_are_refused() {
        for prefix in ["a-b", "x;drop", "1abc", &"p".repeat(41)] {
            let config = SqlConfig {
                table_prefix: prefix.to_owned(),
                ..SqlConfig::default()
            };
            let err = SqlLocker::new("postgres://h/db", config).expect_err(prefix);
            assert!(err.to_string().contains("table prefix"), "{err}");
        }
        let config = SqlConfig {
            schema: Some("public\"; --".into()),
            ..SqlConfig::default()
        };
        assert!(SqlLocker::new("postgres://h/db", config).is_err());
    }

    #[test]
    fn urls_that_are_no_database_are_refused_without_their_credentials() {
        for url in ["http://user:pw@h/x", "redis://:pw@h:6379", "h:7001"] {
            let err = SqlLocker::new(url, SqlConfig::default()).expect_err(url);
            let text = err.to_string();
            assert!(text.contains("postgres://"), "{text}");
            assert!(!text.contains("pw"), "{text}");
        }
    }

    #[tokio::test]
    async fn debug_and_endpoint_never_show_the_password() {
        let locker = SqlLocker::new(
            "postgres://app:s3cr3t@db.internal:5432/app",
            SqlConfig::default(),
        )
        .expect("a URL");
        assert_eq!(locker.endpoint(), "postgres://db.internal:5432/app");
        assert!(!format!("{locker:?}").contains("s3cr3t"));
    }
}
