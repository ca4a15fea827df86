//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the fence table first, exactly as schema() gives it plus a CHECK (token <> 0); the shape check never looks at CHECK constraints, so the lockers use it, its first row `(1, 0)` is never written, and when the entries table is dropped and made again (docs/sql.md: "the fence table is not empty: quarantine") a fresh locker finds the fence table empty, starts the new table at epoch 0 and grants a held write lock to a second writer at once.
//!
//! docs/sql.md ("What it does not guarantee"): "a user that may only
//! create tables in the database could make them first: a locker refuses
//! lock tables that are not as `schema()` makes them"; and ("Restarts,
//! failover and backups"): "entries table dropped and created again |
//! ... the fence table is not empty: quarantine". The check
//! (src/sql/store/shape.rs, `Store::mysql_shape`) compares the keys, the
//! columns and the engine only. The first epoch marker is 0 (no
//! quarantine) whenever the fence table holds no row
//! (src/sql/dialect.rs, `Dialect::create_in`: `CASE WHEN EXISTS (SELECT 1
//! FROM fence) ...`), and the row `(1, 0)` that records that an entries
//! table existed is refused by mallory's CHECK; no fencing call is made,
//! so no other row is ever written either.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. `holder` takes `x` (validity and quarantine 8 s,
//! the server up for longer than that); the operator drops the entries
//! table; a locker of a new process asks for `x`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, Lease, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::mallory::{as_mallory, mallory_with, refused_to_mallory};
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entries_table_made_again_beside_a_fence_table_another_user_made_is_quarantined() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let started = Instant::now();
    let span = Duration::from_secs(8);
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("fx_", span, span)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `fx_fence`"))
        .expect("the fence table's statement")
        .clone();
    let tail = "token bigint NOT NULL)";
    assert!(fence.contains(tail), "control: the fence columns: {fence}");
    // Every column, the primary key and the engine stay schema()'s.
    let planted = fence.replace(tail, "token bigint NOT NULL, CHECK (token <> 0))");

    let mut mallory = mallory_with(&server, "CREATE").await;
    as_mallory(
        &mut mallory,
        &planted,
        "mallory makes the fence table before any locker (CREATE)",
    )
    .await;
    refused_to_mallory(
        &mut mallory,
        "INSERT INTO fx_fence (id, token) VALUES (1, 5)",
        "mallory has no right to the table's rows",
    )
    .await;
    let _ = mallory.close().await;

    // The server up for longer than the quarantine: a quarantine after
    // this point comes from the epoch marker alone.
    let up = span + Duration::from_secs(2);
    tokio::time::sleep(up.saturating_sub(started.elapsed())).await;

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url(), settings()).expect("a URL");
        Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
            .lease(Lease {
                validity: span,
                refresh_interval: Duration::from_secs(3),
                safety_margin: Duration::from_secs(1),
            })
            .owner(owner)
            .build()
            .expect("a client")
    };
    let holder = node("holder");
    let held = match holder
        .rw_mutex(["x"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(5))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            // Refusing the table is safe, when the refusal names why.
            let said = refused.to_string();
            assert!(
                said.contains("fx_fence") && said.to_ascii_lowercase().contains("check"),
                "the lockers refuse the fence table, naming it and its constraint: {said}"
            );
            return;
        }
    };
    let granted_at = Instant::now();
    let fence_rows = server.sql("SELECT COUNT(*) FROM fx_fence;");
    assert_eq!(
        fence_rows.trim(),
        "0",
        "control: mallory's CHECK kept the fence table's first row out"
    );

    // The documented event: the entries table dropped and made again.
    server.sql("DROP TABLE fx_entries;");
    let thief = node("thief");
    let stolen = thief
        .rw_mutex(["x"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(3))
        .await;
    // Both trusting `x` at once: the holder not told of a loss yet.
    let holder_trusts = tokio::time::timeout(Duration::ZERO, held.lost())
        .await
        .is_err();
    let marker = server.sql("SELECT deadline FROM fx_entries WHERE kind = 'e';");
    assert!(
        stolen.is_err() || !holder_trusts,
        "`x` was granted to a second writer {:?} after `holder` took it (for {span:?}), while \
         `holder` still trusts it: the fence table mallory (CREATE only) made with a CHECK \
         (token <> 0) stayed empty, so the entries table made again began at epoch {} with \
         no quarantine",
        granted_at.elapsed(),
        marker.trim()
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), held.unlock()).await;
}
