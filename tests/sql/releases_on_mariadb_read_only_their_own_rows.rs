//! Reproduces a past break: on MariaDB, a release deleted its one row with `(name, uid, kind) IN ((?, ?, ?))`, which MariaDB plans as a scan of the whole entries table (`EXPLAIN`: type ALL), so calls on unrelated names waited for each other's row locks and deadlocked.
//!
//! Seen by the review: twelve clients, each on a name of its own, had 147
//! of 2,164 calls fail with "Deadlock found" in 8 s on MariaDB, none on
//! PostgreSQL. Calls on distinct names share no row. This test reads the
//! statements the locker ran from the server's general log and asks the
//! server how it runs each `DELETE`: never by reading every row.

use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockArgs, NetLocker};

use crate::both::config;
use crate::sql_support::MariaServer;

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<Vec<_>>()
            .into(),
        owner: "test".into(),
        source: "tests/sql/releases_on_mariadb_read_only_their_own_rows.rs".into(),
        quorum: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_on_mariadb_never_scan_the_entries_table() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    // A call timeout well past the tests' usual 400 ms: nothing here times
    // out on purpose, and the first lock (200 names, on a server just
    // started) took longer than that on a busy machine.
    let settings = quorum_lock::sql::SqlConfig {
        call_timeout: Duration::from_secs(5),
        ..config("own_rows_", Duration::from_secs(60), Duration::ZERO)
    };
    let locker = SqlLocker::connect(&server.url(), settings)
        .await
        .expect("a database");
    // Rows of other names, so that the server weighs a scan against the
    // key as it would on a table in use (on a handful of rows it reads
    // them all whatever the statement).
    let others: Vec<String> = (0..200).map(|i| format!("other-{i}")).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    assert!(locker
        .lock(&args("u-others", &others))
        .await
        .expect("a lock"));
    server.sql("SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 1;");
    for names in [&["a"][..], &["b", "c"][..]] {
        let call = args("u", names);
        assert!(locker.lock(&call).await.expect("a lock"));
        assert!(locker.unlock(&call).await.expect("a release"));
    }
    // Two readers: the first one's release deletes its holder row alone.
    let (first, second) = (args("r1", &["shared"]), args("r2", &["shared"]));
    assert!(locker.rlock(&first).await.expect("a read lock"));
    assert!(locker.rlock(&second).await.expect("a read lock"));
    assert!(locker.runlock(&first).await.expect("a release"));
    assert!(locker.runlock(&second).await.expect("a release"));
    server.sql("SET GLOBAL general_log = 0;");
    let deletes = server.sql(
        "SELECT REPLACE(REPLACE(CONVERT(argument USING utf8mb4), '\\n', ' '), '\\t', ' ') \
         FROM mysql.general_log WHERE command_type IN ('Execute', 'Query') \
         AND argument LIKE 'DELETE%'",
    );
    let deletes: Vec<&str> = deletes.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        !deletes.is_empty(),
        "the releases ran no DELETE the log shows"
    );
    for delete in deletes {
        let plan = server.sql(&format!("EXPLAIN {delete}"));
        // Columns: id, select_type, table, type, ...
        let scans = plan
            .lines()
            .any(|row| row.split('\t').nth(3) == Some("ALL"));
        assert!(!scans, "{delete}\nreads every row of the table:\n{plan}");
    }
}
