//! Faults of real databases and holders: a holder's process killed (its
//! rows expire on the database's clock and the next waiter is granted), a
//! database crashed or restarted while a lock is held, and a pool with
//! fewer connections than callers.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::testing::History;
use quorum_lock::{Dsync, Error, Lease, LockMode, NetLocker};
use tokio::time::{sleep, timeout, Instant};

use crate::both::config;
use crate::Servers;

/// Refreshed every 250 ms, trusted for 1.5 s of 2 s.
fn short_lease() -> Lease {
    Lease {
        validity: Duration::from_secs(2),
        refresh_interval: Duration::from_millis(250),
        safety_margin: Duration::from_millis(500),
    }
}

fn client(lockers: Vec<Arc<dyn NetLocker>>, lease: Lease, owner: &str) -> Dsync {
    Dsync::builder(lockers)
        .lease(lease)
        .owner(owner)
        .build()
        .expect("a client")
}

fn node(url: &str, prefix: &str, validity: Duration, quarantine: Duration) -> Arc<dyn NetLocker> {
    Arc::new(SqlLocker::new(url, config(prefix, validity, quarantine)).expect("a URL"))
}

const CHILD_URL: &str = "QUORUM_LOCK_SQL_CHILD_URL";

/// The holder process of `a_killed_holders_rows_expire_and_the_next_waiter_is_granted`:
/// takes the lock, says so on stdout, and waits to be killed.
#[tokio::test]
#[ignore = "the holder process the test below starts; not a test of its own"]
async fn holder_child() {
    let url = std::env::var(CHILD_URL).expect("started by the parent test");
    let ds = client(
        vec![node(
            &url,
            "killed_",
            Duration::from_secs(2),
            Duration::ZERO,
        )],
        short_lease(),
        "child",
    );
    let guard = ds
        .rw_mutex(["killed"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("the child's lock");
    let mut out = std::io::stdout();
    writeln!(out, "held {}", guard.uid()).expect("stdout");
    out.flush().expect("stdout");
    sleep(Duration::from_secs(60)).await;
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_rows_expire_and_the_next_waiter_is_granted() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "faults::holder_child",
            "--include-ignored",
            "--nocapture",
            "--quiet",
        ])
        .env(CHILD_URL, &servers.pg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the holder process");
    let stdout = child.stdout.take().expect("piped");
    let line = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        lines.find_map(|l| l.ok().filter(|l| l.starts_with("held ")))
    })
    .await
    .expect("read the child")
    .expect("the child took the lock");
    let child_uid = line.trim_start_matches("held ").to_owned();

    let waiter_node = node(
        &servers.pg,
        "killed_",
        Duration::from_secs(2),
        Duration::ZERO,
    );
    let ds = client(vec![waiter_node.clone()], short_lease(), "waiter");
    let mutex = ds.rw_mutex(["killed"]).expect("a name");
    // Held by a live process: refused, however often it is asked.
    sleep(Duration::from_millis(2_500)).await;
    assert!(
        matches!(mutex.try_lock().await, Err(Error::WouldBlock)),
        "the child holds it"
    );

    child.kill().expect("SIGKILL the holder");
    child.wait().expect("reap the holder");
    let killed = Instant::now();
    let guard = mutex
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("granted once the child's entry expired");
    // The child's last refresh was at most a refresh interval (250 ms)
    // before the kill, and its entry lives a validity (2 s) from there on
    // the database's clock: not granted before that, and granted within
    // the wait's 10 s, so by expiry and not by anything else.
    let waited = killed.elapsed();
    assert!(
        waited >= Duration::from_millis(1_500),
        "granted {waited:?} after the kill, before the child's entry could expire"
    );
    let listed = waiter_node.locks().await.expect("a listing");
    assert!(
        listed.iter().all(|e| e.uid != child_uid),
        "the killed holder's rows: {listed:?}"
    );
    assert!(listed.iter().any(|e| e.uid == guard.uid()));
    guard.unlock().await.expect("released");
}

/// One holder on one database, and a second client that asks for the same
/// lock once `event` has happened to the database: the second must not be
/// granted while the first still believes it holds.
async fn held_through(
    servers: &Arc<Servers>,
    url: &str,
    prefix: &str,
    lease: Lease,
    event: impl FnOnce(&Servers),
) -> (History, bool, Result<(), Error>) {
    let quarantine = lease.validity;
    let lease_validity = lease.validity;
    let holder = client(
        vec![node(url, prefix, lease.validity, quarantine)],
        lease,
        "holder",
    );
    let other = client(
        vec![node(url, prefix, lease.validity, quarantine)],
        lease,
        "other",
    );
    let history = Arc::new(History::new());
    let guard = holder
        .rw_mutex(["through"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(20))
        .await
        .expect("the holder's lock");
    history.acquired(guard.uid(), guard.resources(), LockMode::Write);
    let holder_uid = guard.uid().to_owned();
    let watch = {
        let history = history.clone();
        let lost = guard.lost();
        let uid = holder_uid.clone();
        tokio::spawn(async move {
            lost.await;
            history.lost_signalled(&uid);
        })
    };
    let event_started = Instant::now();
    tokio::task::block_in_place(|| event(servers));
    let event_took = event_started.elapsed();
    // What the table says right after the event, for the failure message:
    // a holder that is never told means a refresh counted after it.
    let probe = SqlLocker::new(url, config(prefix, lease_validity, quarantine)).expect("a URL");
    let quarantine_after = timeout(Duration::from_secs(10), probe.quarantine_left()).await;
    let lost_at_once = guard.is_lost();
    let granted = timeout(
        Duration::from_secs(30),
        other
            .rw_mutex(["through"])
            .expect("a name")
            .lock_timeout(Duration::from_secs(3)),
    )
    .await
    .expect("bounded");
    let other_granted = match granted {
        Ok(g) => {
            history.acquired(g.uid(), g.resources(), LockMode::Write);
            history.released(g.uid());
            g.unlock().await.map(|_| ())
        }
        Err(e) => Err(e),
    };
    // A loss is told within the lease's trust window of the last refresh
    // that counted; past a validity more, it never will be.
    let lost = timeout(lease_validity * 2, guard.lost()).await.is_ok();
    if !lost {
        history.released(&holder_uid);
        eprintln!(
            "the holder was never told: the event took {event_took:?}; right after it the \
             holder's lock was lost: {lost_at_once}, and the table's quarantine had \
             {quarantine_after:?} left; the other client got {other_granted:?}"
        );
    }
    let _ = guard.unlock().await;
    watch.abort();
    let _ = watch.await;
    let history = Arc::try_unwrap(history).unwrap_or_else(|_| panic!("still shared"));
    (history, lost, other_granted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_crash_while_a_lock_is_held_quarantines_until_the_holder_knows() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.pg.clone();
    // SIGKILL and start again: the unlocked table comes back empty.
    let (history, lost, other) = held_through(&servers, &url, "crash_", short_lease(), |s| {
        s.pg_server().restart()
    })
    .await;
    history.check().expect("nobody granted beside the holder");
    assert!(
        lost,
        "the holder's lock went with the crash, and it was told"
    );
    let rows = servers
        .run(
            &url,
            "SELECT count(*) FROM crash_entries WHERE kind = 'e' AND deadline > 0".into(),
        )
        .await;
    assert_eq!(rows.trim(), "1", "a new epoch began after the crash");
    // The other client may or may not have got it within its 3 s, which
    // is within the quarantine; it is granted once that is over.
    if let Err(e) = other {
        assert!(
            matches!(
                e,
                Error::Quarantined { .. } | Error::QuorumUnavailable { .. }
            ),
            "{e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_postgres_restart_quarantines_until_the_holder_knows() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.pg.clone();
    // The rows survive a clean shutdown, but a table cannot tell a clean
    // restart from a dump restored into a new cluster: the epoch marker
    // names the postmaster's start, so a lone holder is told its lock is
    // gone, and nobody is granted before that.
    let (history, lost, _) = held_through(&servers, &url, "clean_", short_lease(), |s| {
        s.pg_server().restart_clean()
    })
    .await;
    history.check().expect("nobody granted beside the holder");
    assert!(
        lost,
        "a restarted PostgreSQL quarantines, so a lone holder is told"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mariadb_restart_while_a_lock_is_held_quarantines_until_the_holder_knows() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let url = servers.maria.clone();
    // Past MariaDB's own start-up quarantine first.
    sleep(short_lease().validity).await;
    let (history, lost, _) = held_through(&servers, &url, "mrestart_", short_lease(), |s| {
        s.maria_server().restart()
    })
    .await;
    history.check().expect("nobody granted beside the holder");
    assert!(
        lost,
        "a restarted MariaDB quarantines, so a lone holder is told its lock is gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_one_serves_many_callers_and_fails_them_in_time_when_the_database_hangs() {
    let Some(servers) = Servers::start() else {
        return;
    };
    // Calls time out on purpose here, within the callers' bounds.
    let settings = SqlConfig {
        pool_size: 1,
        call_timeout: Duration::from_millis(400),
        ..config("pool_", Duration::from_secs(60), Duration::ZERO)
    };
    let locker: Arc<dyn NetLocker> = Arc::new(
        SqlLocker::connect(&servers.pg, settings)
            .await
            .expect("a database"),
    );
    let ds = client(vec![locker.clone()], Lease::default(), "pool");
    // Sixteen callers share one connection: each waits its turn.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let ds = ds.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("pool-{}", i % 4);
            let guard = ds
                .rw_mutex([name])?
                .lock_timeout(Duration::from_secs(20))
                .await?;
            guard.unlock().await
        }));
    }
    for task in tasks {
        task.await
            .expect("a caller")
            .expect("served through the one connection");
    }
    // The database hangs, connections already open included: every caller
    // fails within its bounds, none hangs.
    tokio::task::block_in_place(|| servers.pg_server().pause());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let ds = ds.clone();
        tasks.push(tokio::spawn(async move {
            ds.rw_mutex([format!("hung-{i}")])?
                .lock_timeout(Duration::from_secs(2))
                .await
                .map(|_| ())
        }));
    }
    for task in tasks {
        let result = task.await.expect("a caller");
        assert!(
            matches!(
                result,
                Err(Error::QuorumUnavailable { .. } | Error::Timeout)
            ),
            "{result:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !locker.is_online(),
        "a locker whose calls fail counts as offline"
    );
    servers.pg_server().resume();
    let guard = timeout(
        Duration::from_secs(20),
        ds.rw_mutex(["after"])
            .expect("a name")
            .lock_timeout(Duration::from_secs(15)),
    )
    .await
    .expect("bounded")
    .expect("served again once the database answers");
    assert!(locker.is_online(), "online again");
    guard.unlock().await.expect("released");
}
