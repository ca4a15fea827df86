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

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::task::JoinHandle;

use crate::locker::proclamation::{election_resource, Proclamation, WatchArgs};
use crate::locker::wait::{PushEvent, WaitArgs, WaitReply};
use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

mod background;
mod calls;
mod config;
mod dialect;
#[cfg(feature = "mysql")]
mod doorbell;
mod routines;
mod server_notices;
mod state;
mod store;
#[cfg(test)]
mod tests;
mod url;
mod waits;

#[cfg(feature = "postgres")]
use background::listener;
use background::{on_notice, poll};
use calls::Waited;
use config::LONGEST;
pub use config::{schema, SqlConfig};

pub use dialect::Backend;
use dialect::{Dialect, Tables};
use store::Store;
use waits::Waits;

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
    /// The doorbell of a MySQL locker's waiters (`doorbell.rs`).
    doorbell: Option<JoinHandle<()>>,
    /// The notices this locker's own calls leave for its own waiters,
    /// until the task that acts on them starts.
    local: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
    local_task: Option<JoinHandle<()>>,
}

struct Shared {
    store: Store,
    config: SqlConfig,
    /// The URL, for the `LISTEN` connection (PostgreSQL); never shown.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    url: String,
    /// This locker's notification channel.
    channel: String,
    waits: Waits,
    /// Whether the `LISTEN` connection listens now (PostgreSQL): `None`
    /// until its first attempt ended.
    listening: tokio::sync::watch::Sender<Option<bool>>,
    /// Woken when the doorbell rang (MySQL): the poller reads at once.
    rung: Arc<tokio::sync::Notify>,
}

/// The longest a wait waits for the LISTEN connection's first attempt.
const FIRST_LISTEN: Duration = Duration::from_millis(250);

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
        // What the database says is never shown with the password in it,
        // whether the driver's environment, the URL or its password file
        // (below) gave it.
        for variable in ["PGPASSWORD", "MYSQL_PWD"] {
            if let Some(password) = std::env::var_os(variable) {
                crate::locker::secrets::remember(password.as_encoded_bytes());
            }
        }
        crate::locker::secrets::remember_url(url);
        let backend = Backend::of_url(url).ok_or_else(|| {
            let scheme = url.split_once("://").map_or("", |(s, _)| s);
            Error::InvalidArgument(format!(
                "{} is not a database URL this build supports: use postgres:// (feature \
                 \"postgres\") or mysql:// (feature \"mysql\")",
                if scheme.is_empty() {
                    "a URL without a scheme".to_owned()
                } else if crate::locker::redact::plausible_scheme(scheme) {
                    format!("scheme {scheme:?}")
                } else {
                    // It may be a password typed in the wrong place.
                    "a URL whose text before \"://\" is no scheme (not shown)".to_owned()
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
        // Every parse of the URL by the PostgreSQL driver (below, in
        // `Store::new` and for the password file's line) reads the password
        // file when the URL gives no password, and logs a malformed line
        // of it whole at WARN: those lines are remembered first, by a
        // reading of our own that logs nothing, and the parses run within
        // the locker's masking.
        #[cfg(feature = "postgres")]
        if backend == Backend::Postgres {
            crate::locker::secrets::remember_pgpass_malformed();
        }
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
        // The line of PostgreSQL's password file the driver would use,
        // once the URL's parameters are known to be the driver's (parsing
        // others, the driver logs them, values and all).
        #[cfg(feature = "postgres")]
        // The backend the URL was classified as: its scheme without case,
        // as the driver reads it (`POSTGRES://` too).
        if let Some(options) = (backend == Backend::Postgres)
            .then(|| {
                store
                    .masking
                    .run(|| url.parse::<sqlx::postgres::PgConnectOptions>().ok())
            })
            .flatten()
        {
            crate::locker::secrets::remember_pgpass(
                options.get_host(),
                options.get_port(),
                options.get_database(),
                options.get_username(),
            );
        }
        Ok(SqlLocker {
            shared: Arc::new(Shared {
                store,
                config,
                url: url.to_owned(),
                channel,
                waits: Waits::default(),
                listening: tokio::sync::watch::Sender::new(None),
                rung: Arc::default(),
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
            tasks.poller = Some(tokio::spawn(poll(
                Arc::downgrade(&self.shared),
                self.shared.rung.clone(),
            )));
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
            let listen = listener::listen(Arc::downgrade(&self.shared));
            tasks.listener = Some(tokio::spawn(self.shared.store.masking.scope(listen)));
        }
        #[cfg(feature = "mysql")]
        if listen
            && self.backend() == Backend::MySql
            && tasks.doorbell.as_ref().is_none_or(JoinHandle::is_finished)
        {
            let answer = doorbell::answer(
                Arc::downgrade(&self.shared),
                self.shared.store.connect_options(),
                self.shared.rung.clone(),
            );
            tasks.doorbell = Some(tokio::spawn(answer));
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
            tasks.doorbell.take(),
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
            // A wait waits for the LISTEN connection's first attempt (a
            // moment at most), so that its first turn is not sent to
            // nobody; once that attempt failed, waits go on without it, and
            // the waiter's re-check stands in for the notices.
            let mut listening = shared.listening.subscribe();
            let _ = tokio::time::timeout(
                shared.config.call_timeout.min(FIRST_LISTEN),
                listening.wait_for(Option::is_some),
            )
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
