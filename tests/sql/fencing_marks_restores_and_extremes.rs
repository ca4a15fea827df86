//! `SqlLocker` where it once broke, each kept as a test: fencing marks that raced,
//! logical restores and re-created tables that started no quarantine, a
//! password in an error, and settings at their extremes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, Wake};

use crate::sql_shared::{args_of, config, guarded_locker, run};
use crate::sql_support::MARIA_PASSWORD;
use crate::Servers;

fn args(uid: &str, names: &[&str]) -> LockArgs {
    args_of("review", uid, names)
}

/// The PostgreSQL's clock, ns.
async fn pg_now_ns(servers: &Arc<Servers>) -> u64 {
    let us = servers
        .run(
            &servers.pg,
            "SELECT (extract(epoch from clock_timestamp()) * 1000000)::bigint".into(),
        )
        .await;
    let us: u64 = us.trim().parse().expect("the clock in microseconds");
    us * 1000
}

/// Waits (bounded) until a backend of the PostgreSQL waits for a lock
/// in a statement starting with `prefix` (which holds no quote).
async fn pg_until_blocked(servers: &Arc<Servers>, prefix: &str) {
    assert!(!prefix.contains('\''));
    let count = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '{prefix}%'"
    );
    for _ in 0..500 {
        let n: u64 = servers
            .run(&servers.pg, count.clone())
            .await
            .trim()
            .parse()
            .expect("a count");
        if n > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no statement {prefix:?} ever waited for a lock");
}

/// A past break, fixed: The node's fencing mark goes back when the first two fencing calls
/// of a node (no mark row yet) overlap: `SELECT … FOR UPDATE` locks no row
/// that does not exist, and `put_mark` overwrites the mark
/// unconditionally (`token = EXCLUDED.token`). A later token on the same
/// resource is then below one drawn before on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_never_go_back_when_the_first_marks_race() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let pg_url = servers.pg.clone();
    let prefix = "rv_fence_";
    let locker = Arc::new(
        SqlLocker::connect(&pg_url, config(prefix))
            .await
            .expect("connect"),
    );
    // A reader of `y` whose entry expires at once, beside a live reader:
    // the next call on `y` deletes the expired row.
    let short = SqlLocker::connect(
        &pg_url,
        SqlConfig {
            validity: Duration::from_millis(1),
            ..config(prefix)
        },
    )
    .await
    .expect("connect");
    assert!(locker.rlock(&args("b", &["y"])).await.unwrap());
    assert!(short.rlock(&args("c", &["y"])).await.unwrap());
    assert!(locker.lock(&args("a", &["x"])).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await; // c's 1 ms lease ends

    // Another session holds c's (expired) row: the fencing call on `y`
    // reads the (missing) mark, then waits to delete the row. This is only
    // a slow transaction, as a pause of the client or the network makes.
    let mut other = servers.pg_server().session();
    other.exec(&format!(
        "BEGIN; SELECT 1 FROM \"{prefix}entries\" WHERE name = 'y' AND uid = 'c' AND kind = 'h' FOR UPDATE;"
    ));
    let slow = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.fence(&args("b", &["y"]), LockMode::Read, 0).await })
    };
    pg_until_blocked(&servers, &format!("DELETE FROM \"{prefix}entries\"")).await;

    // Meanwhile `a` draws a token on `x` with a floor ahead of the clock
    // (as a locker whose clock runs 0.9 s ahead makes the coordinator ask).
    // Since the fix it waits for the slow call's lock on the node's mark,
    // so it runs beside the slow transaction, which is then let go.
    let floor = pg_now_ns(&servers).await + 900_000_000;
    let first = {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .fence(&args("a", &["x"]), LockMode::Write, floor)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    other.exec("ROLLBACK;");
    let first = first.await.unwrap().unwrap().expect("a holds x");
    assert!(first >= floor);
    let late = slow.await.unwrap().unwrap().expect("b holds y");
    let second = locker
        .fence(&args("a", &["x"]), LockMode::Write, 0)
        .await
        .unwrap()
        .expect("a holds x");
    assert!(
        second > first,
        "fencing token on x went back: {first} then {second} (the late call on y wrote the mark {late})"
    );
}

/// A past break, fixed: The password shows in the error of a URL that does not parse: the
/// endpoint is cut at the first `?` or `#` before the userinfo is removed,
/// so an unencoded `#` or `?` in the password leaves user and password
/// prefix in it.
#[test]
fn a_url_that_does_not_parse_never_shows_its_password() {
    for url in [
        "postgres://locker:s3cr#et@db.internal:5432/locks",
        "mysql://locker:s3cr?et@db.internal:3306/locks",
    ] {
        let err = SqlLocker::new(url, config("rv_url_")).expect_err(url);
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains("s3cr"), "the password shows: {text}");
        }
    }
}

/// A sink that counts pushes.
struct Count(AtomicUsize);
impl PushSink for Count {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A past break, fixed: A waiter's `place_ttl` near `Duration::MAX` (the trait allows any
/// duration above zero; `LocalLocker` takes `min(validity)`) panics the
/// locker: `Waits::register` and `watched_names` compute
/// `w.place_ttl * 2`, which overflows. Here through `register`, which
/// computes it once 1024 waiters are registered. They wait on 32 held
/// names, so that no line grows long enough to slow each wait down.
#[tokio::test]
async fn a_place_ttl_near_the_maximum_never_panics_the_locker() {
    const NAMES: u32 = 32;
    let Some(servers) = Servers::start() else {
        return;
    };
    let prefix = "rv_ttl_";
    let locker = Arc::new(
        SqlLocker::connect(&servers.pg, config(prefix))
            .await
            .expect("connect"),
    );
    let names: Vec<String> = (0..NAMES).map(|n| format!("t{n}")).collect();
    for name in &names {
        assert!(locker.lock(&args("holder", &[name])).await.unwrap());
    }
    let sink = Arc::new(Count(AtomicUsize::new(0)));
    let task = {
        let (locker, names) = (locker.clone(), names.clone());
        tokio::spawn(async move {
            for i in 0..1030u32 {
                let wait = WaitArgs {
                    ticket: Ticket::now(),
                    place_ttl: Duration::MAX,
                    wake: Some(Wake::new(sink.clone(), 0)),
                };
                let name = &names[(i % NAMES) as usize];
                locker
                    .lock_wait(&args(&format!("w{i}"), &[name]), LockMode::Write, &wait)
                    .await
                    .expect("a wait");
            }
        })
    };
    let outcome = task.await;
    for name in &names {
        let _ = locker.force_unlock(&args("", &[name])).await;
    }
    assert!(
        outcome.is_ok(),
        "lock_wait panicked: {:?}",
        outcome.err().map(|e| e.to_string())
    );
}

/// A past break, fixed: PostgreSQL restored from a logical backup (`pg_dump`, which dumps
/// the data of unlogged tables unless told not to) brings the epoch
/// marker back, so no quarantine begins, while every grant made after the
/// backup is forgotten: a second holder is granted at once. docs/sql.md
/// says "unlogged tables are not in backups: quarantine"; that holds for
/// physical backups only.
#[tokio::test]
async fn a_postgres_restored_from_pg_dump_quarantines_instead_of_granting_a_held_lock() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let prefix = "rv_dump_";
    let locker = guarded_locker(&servers.pg, prefix).await;
    assert_eq!(locker.quarantine_left().await.unwrap(), None);
    let dump = std::env::temp_dir().join(format!("rv_dump_{}.pgdump", std::process::id()));
    let dump = dump.to_str().unwrap();
    let port = servers.pg_server().port().to_string();
    let conn = [
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-U",
        "postgres",
        "-d",
        "quorum",
    ];
    let mut backup = conn.to_vec();
    backup.extend([
        "-Fc",
        "-t",
        "rv_dump_entries",
        "-t",
        "rv_dump_fence",
        "-f",
        dump,
    ]);
    run("pg_dump", &backup);
    // Granted after the backup was taken.
    assert!(locker.lock(&args("a", &["x"])).await.unwrap());
    // The database is restored from the backup.
    let mut restore = conn.to_vec();
    restore.extend(["--clean", dump]);
    run("pg_restore", &restore);
    let _ = std::fs::remove_file(dump);
    let other = guarded_locker(&servers.pg, prefix).await;
    let second = other.lock(&args("b", &["x"])).await;
    assert!(
        !matches!(second, Ok(true)),
        "a's write lock was forgotten by the restore and b was granted it without quarantine"
    );
}

/// A past break, fixed: The same on MariaDB: a logical backup restored into the running
/// server (`mariadb-dump`, then the dump fed back) restarts nothing, so
/// the uptime does not start a quarantine, and the marker comes back with
/// the same `server_id`. docs/sql.md: "the restored server starts:
/// quarantine".
#[tokio::test]
async fn a_mariadb_restored_from_a_dump_quarantines_instead_of_granting_a_held_lock() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let prefix = "rv_mydump_";
    let locker = guarded_locker(&servers.maria, prefix).await;
    if let Some(left) = locker.quarantine_left().await.unwrap() {
        // The dev server started less than a quarantine ago.
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    let port = servers.maria_server().port().to_string();
    let password = format!("-p{MARIA_PASSWORD}");
    let conn = ["-h", "127.0.0.1", "-P", &port, "-uquorum", &password];
    let mut backup = conn.to_vec();
    backup.extend(["quorum", "rv_mydump_entries", "rv_mydump_fence"]);
    let dump = run("mariadb-dump", &backup);
    assert!(locker.lock(&args("a", &["x"])).await.unwrap());
    let mut restore = std::process::Command::new("mariadb")
        .args(conn)
        .arg("quorum")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("mariadb");
    {
        use std::io::Write as _;
        restore.stdin.take().unwrap().write_all(&dump).unwrap();
    }
    assert!(restore.wait().unwrap().success());
    let other = guarded_locker(&servers.maria, prefix).await;
    let second = other.lock(&args("b", &["x"])).await;
    assert!(
        !matches!(second, Ok(true)),
        "a's write lock was forgotten by the restore and b was granted it without quarantine"
    );
}

/// A past break, fixed: An entries table that is gone (dropped, or a restore to a point
/// before it existed) while the durable fence table stays is created
/// again with the creator's marker, epoch 0: no quarantine, although
/// grants were made from the table before. The creator could tell: the
/// fence table (or its mark) was already there.
#[tokio::test]
async fn a_recreated_entries_table_is_quarantined() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let prefix = "rv_drop_";
    let locker = guarded_locker(&servers.pg, prefix).await;
    assert!(locker.lock(&args("a", &["x"])).await.unwrap());
    assert!(locker
        .fence(&args("a", &["x"]), LockMode::Write, 0)
        .await
        .unwrap()
        .is_some());
    servers
        .run(&servers.pg, format!("DROP TABLE \"{prefix}entries\""))
        .await;
    let other = guarded_locker(&servers.pg, prefix).await;
    let second = other.lock(&args("b", &["x"])).await;
    assert!(
        !matches!(second, Ok(true)),
        "a's lock was lost with the table and b was granted it without quarantine"
    );
}

/// A past break, fixed: A long call timeout (here 30 days; every other duration of the
/// library may be `Duration::MAX`) makes every PostgreSQL connection fail:
/// the session setup sends `SET statement_timeout = <ms>`, and PostgreSQL
/// takes at most `i32::MAX` ms (24.8 days) there. The locker never works,
/// and its error blames the database.
#[tokio::test]
async fn a_call_timeout_beyond_postgres_range_still_connects_and_grants() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let prefix = "rv_timeout_";
    let config = SqlConfig {
        call_timeout: Duration::from_secs(30 * 24 * 3600),
        ..config(prefix)
    };
    // Bounded here: the locker itself retries its connection for the call
    // timeout, 30 days.
    let bound = Duration::from_secs(10);
    let locker = tokio::time::timeout(bound, SqlLocker::connect(&servers.pg, config))
        .await
        .expect("connect hangs: every connection fails its session setup")
        .expect("a locker with a long call timeout connects");
    let granted = tokio::time::timeout(bound, locker.lock(&args("a", &["x"])))
        .await
        .expect("lock hangs")
        .expect("an answer");
    assert!(granted);
}

/// A past break, fixed: a fence table emptied alone (`TRUNCATE`, or a restore of that table
/// that lost its row) let tokens go back. The entries table kept its
/// epoch, so no quarantine started, and the next token was the database's
/// clock: below one drawn a moment before with a floor ahead of it (a
/// token of another node, within the clock tolerance of one second).
/// With no mark to go by, a token starts one tolerance ahead of the
/// clock, above any token drawn before with a floor the locker took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_never_go_back_when_the_fence_table_is_emptied() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for url in [servers.pg.clone(), servers.maria.clone()] {
        let locker = SqlLocker::connect(&url, config("emptied_"))
            .await
            .expect("a database");
        let held = args("a", &["x"]);
        assert!(locker.lock(&held).await.expect("a lock"));
        // A floor 800 ms ahead of the database's clock (the clocks of the
        // two kinds of server here agree with this process's).
        let ahead = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .saturating_add(Duration::from_millis(800));
        let floor = u64::try_from(ahead.as_nanos()).expect("fits");
        let first = locker
            .fence(&held, LockMode::Write, floor)
            .await
            .expect("a token")
            .expect("held");
        assert!(first >= floor, "{url}: {first} < {floor}");
        servers.run(&url, "DELETE FROM emptied_fence".into()).await;
        let second = locker
            .fence(&held, LockMode::Write, 0)
            .await
            .expect("a token")
            .expect("held");
        assert!(
            second > first,
            "{url}: the token went back from {first} to {second} after the fence table was emptied"
        );
    }
}

/// A past break, fixed: a fence table restored without its primary key (`pg_restore -t`
/// of that table alone drops it) made every fencing call fail with the
/// database's bare 42P10; the error now says what is missing and how to
/// put it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_table_without_its_primary_key_is_named_in_the_error() {
    let Some(servers) = Servers::start() else {
        return;
    };
    let locker = SqlLocker::connect(&servers.pg, config("keyless_"))
        .await
        .expect("a database");
    let held = args("a", &["x"]);
    assert!(locker.lock(&held).await.expect("a lock"));
    servers
        .run(
            &servers.pg,
            "ALTER TABLE keyless_fence DROP CONSTRAINT keyless_fence_pkey".into(),
        )
        .await;
    let err = locker
        .fence(&held, LockMode::Write, 0)
        .await
        .expect_err("no key for ON CONFLICT");
    let text = err.to_string();
    assert!(
        text.contains("primary key") && text.contains("schema()"),
        "{text}"
    );
}
