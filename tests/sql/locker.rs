//! One `SqlLocker` on real servers: the conformance suite on PostgreSQL
//! and MariaDB, exclusion under contention over one and three databases,
//! the epoch marker that starts a quarantine, and the errors that say what
//! is wrong.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::testing::{check_locker, History};
use quorum_lock::{Dsync, Error, LockArgs, LockMode, NetLocker};

use crate::both::config;
use crate::sql_shared::args_from;
use crate::sql_support::{MariaServer, PgServer};
use crate::Servers;

async fn conforms(url: String, prefix: &str) {
    let config = config(prefix, Duration::from_secs(60), Duration::ZERO);
    let report = check_locker(|| {
        let (url, config) = (url.clone(), config.clone());
        async move {
            Arc::new(SqlLocker::connect(&url, config).await.expect("a database"))
                as Arc<dyn NetLocker>
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(report.skipped.is_empty(), "skipped: {:?}", report.skipped);
    assert_eq!(report.passed.len(), 13, "{report:?}");
}

// One test per kind of server, so that each runs where only it is
// installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lockers_conform_with_nothing_skipped() {
    let Some(server) = PgServer::start() else {
        return;
    };
    conforms(server.url(), "conform_").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_lockers_conform_with_nothing_skipped() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    conforms(server.url(), "conform_").await;
}

fn args(uid: &str, name: &str) -> LockArgs {
    args_from("tests/sql/locker.rs", uid, name)
}

/// `workers` tasks each add one to a counter `rounds` times, reading it,
/// pausing and writing it back under the lock of `lockers`; returns the
/// counter and the history of holds.
async fn contend(lockers: Vec<Arc<dyn NetLocker>>, workers: u64, rounds: u64) -> (u64, History) {
    let ds = Dsync::builder(lockers).build().expect("a client");
    let counter = Arc::new(AtomicU64::new(0));
    let history = Arc::new(History::new());
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (ds, counter, history) = (ds.clone(), counter.clone(), history.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = ds.rw_mutex(["counter"]).expect("a name");
            for _ in 0..rounds {
                let guard = mutex
                    .lock_timeout(Duration::from_secs(30))
                    .await
                    .expect("granted");
                history.acquired(guard.uid(), guard.resources(), LockMode::Write);
                let seen = counter.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                counter.store(seen + 1, Ordering::SeqCst);
                history.released(guard.uid());
                guard.unlock().await.expect("released");
            }
        }));
    }
    for task in tasks {
        task.await.expect("a worker");
    }
    let history = Arc::try_unwrap(history).unwrap_or_else(|_| panic!("still shared"));
    (counter.load(Ordering::SeqCst), history)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_contending_on_one_and_on_three_databases_never_overlap() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let Some(second_pg) = PgServer::start() else {
        return;
    };
    let node = |url: &str, prefix: &str| {
        let locker = SqlLocker::new(url, config(prefix, Duration::from_secs(60), Duration::ZERO))
            .expect("a URL");
        Arc::new(locker) as Arc<dyn NetLocker>
    };
    let one = vec![node(&servers.pg, "contend1_")];
    let (count, history) = contend(one, 8, 10).await;
    assert_eq!(count, 80, "lost updates over one database");
    history.check().expect("no overlap over one database");

    let three = vec![
        node(&servers.pg, "contend3_"),
        node(&servers.maria, "contend3_"),
        node(&second_pg.url(), "contend3_"),
    ];
    let (count, history) = contend(three, 8, 10).await;
    assert_eq!(count, 80, "lost updates over three databases");
    history.check().expect("no overlap over three databases");
}

/// Whether `locker` answers a grant with the quarantine error.
async fn quarantined(locker: &SqlLocker, uid: &str) -> bool {
    match locker.lock(&args(uid, "epoch")).await {
        Err(e) => {
            assert!(e.to_string().contains("refusing new grants"), "{e}");
            true
        }
        Ok(granted) => {
            assert!(granted, "a free name");
            locker.unlock(&args(uid, "epoch")).await.expect("unlock");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_lost_its_rows_or_changed_server_starts_a_quarantine() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let quarantine = Duration::from_secs(30);
    for url in [servers.pg.clone(), servers.maria.clone()] {
        let settings = SqlConfig {
            table_prefix: "epoch_".into(),
            validity: Duration::from_secs(1),
            quarantine,
            ..SqlConfig::default()
        };
        let locker = SqlLocker::connect(&url, settings.clone())
            .await
            .expect("a database");
        // Made by the locker: nothing was granted from it before, so no
        // quarantine (MariaDB's own start is older than the quarantine
        // only when the server has run for 30 s, so its table is checked
        // for the marker alone, below).
        if url.starts_with("postgres") {
            assert!(!quarantined(&locker, "fresh").await, "{url}: a new table");
            assert_eq!(locker.quarantine_left().await.expect("asked"), None);
        }
        // Every row deleted, the epoch marker with them: a crash of the
        // unlogged table, a promoted replica, a restored backup.
        servers.reset(&url, "epoch_").await;
        assert!(
            quarantined(&locker, "after-reset").await,
            "{url}: after a reset"
        );
        let left = locker
            .quarantine_left()
            .await
            .expect("asked")
            .expect("in quarantine");
        assert!(
            left > quarantine - Duration::from_secs(5) && left <= quarantine,
            "{left:?}"
        );
        // Another locker on the same table sees the same epoch.
        let other = SqlLocker::connect(&url, settings)
            .await
            .expect("a database");
        assert!(quarantined(&other, "other").await, "{url}: a second client");
    }
    // The marker names another server (MariaDB's server_id): a failover.
    let settings = SqlConfig {
        table_prefix: "epoch_id_".into(),
        quarantine,
        ..SqlConfig::default()
    };
    let locker = SqlLocker::connect(&servers.maria, settings)
        .await
        .expect("a database");
    let _ = locker.quarantine_left().await.expect("asked");
    servers
        .run(
            &servers.maria,
            "UPDATE epoch_id_entries SET ticket = '4242', deadline = 0 WHERE kind = 'e'".into(),
        )
        .await;
    let marker = servers
        .run(
            &servers.maria,
            "SELECT ticket FROM epoch_id_entries WHERE kind = 'e'".into(),
        )
        .await;
    assert_eq!(marker.trim(), "4242");
    assert!(locker.quarantine_left().await.expect("asked").is_some());
    let marker = servers
        .run(
            &servers.maria,
            "SELECT ticket FROM epoch_id_entries WHERE kind = 'e'".into(),
        )
        .await;
    assert_ne!(marker.trim(), "4242", "the new epoch names this server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_privileges_a_read_only_server_and_wrong_credentials_are_named() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let fail = |url: String, prefix: &'static str| async move {
        let settings = SqlConfig {
            table_prefix: prefix.into(),
            call_timeout: Duration::from_secs(5),
            ..SqlConfig::default()
        };
        match SqlLocker::connect(&url, settings).await {
            Ok(_) => panic!("{prefix}: connected"),
            Err(e) => {
                let text = e.to_string();
                assert!(!text.contains("pw-"), "a password in {text}");
                text
            }
        }
    };
    // PostgreSQL: a role that may connect but create nothing.
    servers
        .run(
            &servers.pg,
            "CREATE ROLE weak LOGIN PASSWORD 'pw-weak'; REVOKE CREATE ON SCHEMA public FROM PUBLIC"
                .into(),
        )
        .await;
    let url = servers.pg_server().url_as("weak", "pw-weak");
    let text = fail(url, "weak_").await;
    assert!(text.contains("lacks a privilege"), "{text}");
    // A read-only server (or replica).
    servers
        .run(&servers.pg, "CREATE ROLE reader LOGIN PASSWORD 'pw-reader'; ALTER ROLE reader SET default_transaction_read_only = on; GRANT CREATE ON SCHEMA public TO reader".into())
        .await;
    let url = servers.pg_server().url_as("reader", "pw-reader");
    let text = fail(url, "ro_").await;
    assert!(text.contains("read-only"), "{text}");
    let url = servers.pg_server().url_as("nobody", "pw-nobody");
    let text = fail(url, "x_").await;
    assert!(text.contains("database"), "{text}");
    // MariaDB: a user with no privilege on the database.
    servers
        .run(&servers.maria, "CREATE USER 'weak'@'127.0.0.1' IDENTIFIED BY 'pw-weak'; GRANT SELECT ON quorum.* TO 'weak'@'127.0.0.1'".into())
        .await;
    let url = servers.maria_server().url_as("weak", "pw-weak");
    let text = fail(url, "weak_").await;
    assert!(text.contains("lacks a privilege"), "{text}");
    let url = servers.maria_server().url_as("quorum", "pw-wrong");
    let text = fail(url, "x_").await;
    assert!(text.contains("refused the credentials"), "{text}");
    // A server that is not there.
    let text = fail("postgres://u:pw-x@127.0.0.1:1/db".into(), "x_").await;
    assert!(
        text.contains("cannot reach") || text.contains("no connection"),
        "{text}"
    );
    // Not a database at all.
    let err = SqlLocker::new("http://u:pw-x@127.0.0.1/", SqlConfig::default())
        .expect_err("not a database URL");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// Pushes received by a waiter.
#[derive(Default)]
struct Inbox(std::sync::Mutex<Vec<(String, quorum_lock::PushEvent)>>);

impl quorum_lock::PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: quorum_lock::PushEvent) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((uid.to_owned(), event));
    }
}

/// A waiter on one locker is granted when a holder on another locker of
/// the same table lets go: by `NOTIFY` on PostgreSQL, by the waiter's
/// locker's poll on MariaDB. Neither is the caller's re-check: nothing
/// here asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_through_another_locker_reaches_the_waiter_by_notify_or_poll() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for url in [servers.pg.clone(), servers.maria.clone()] {
        let settings = config("across_", Duration::from_secs(60), Duration::ZERO);
        let holder_side = SqlLocker::connect(&url, settings.clone())
            .await
            .expect("a database");
        let waiter_side = SqlLocker::connect(&url, settings)
            .await
            .expect("a database");
        assert!(holder_side
            .lock(&args("holder", "across"))
            .await
            .expect("an answer"));
        let inbox = Arc::new(Inbox::default());
        let wait = quorum_lock::WaitArgs {
            ticket: quorum_lock::Ticket::now(),
            place_ttl: Duration::from_secs(30),
            wake: Some(quorum_lock::Wake::new(inbox.clone(), 0)),
        };
        let queued = waiter_side
            .lock_wait(&args("waiter", "across"), LockMode::Write, &wait)
            .await
            .expect("an answer");
        assert_eq!(queued, quorum_lock::WaitReply::Queued, "{url}");
        let released = tokio::time::Instant::now();
        assert!(holder_side
            .unlock(&args("holder", "across"))
            .await
            .expect("an answer"));
        let pushed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let got = inbox
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                if got
                    .iter()
                    .any(|(u, e)| u == "waiter" && *e == quorum_lock::PushEvent::Granted)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            pushed.is_ok(),
            "{url}: no grant pushed within 5 s of the release"
        );
        eprintln!(
            "{url}: granted {:?} after the release on another locker",
            released.elapsed()
        );
        assert!(waiter_side
            .unlock(&args("waiter", "across"))
            .await
            .expect("an answer"));
    }
}
