//! Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the fence table first, exactly as schema() gives it but with `token` AUTO_INCREMENT (a plain index on it, the table's AUTO_INCREMENT set far ahead); the shape check never looks at EXTRA, so the lockers use it, the first row `(1, 0)` stores her number in place of 0, and every fencing token the locker hands out is one above the mark she chose, not the database's clock.
//!
//! docs/sql.md ("What it does not guarantee"): a user that may only
//! create tables in the database must not forge a fencing token; "a
//! locker refuses lock tables that are not as `schema()` makes them". The
//! check (src/sql/store/shape.rs, `Store::mysql_shape`, over
//! `Dialect::mysql_columns` in src/sql/dialect.rs) compares type,
//! collation, nullability and default, and other unique keys; an
//! AUTO_INCREMENT column shows type `bigint`, NOT NULL, no default, and
//! its index is not unique. `INSERT IGNORE INTO fence (id, token) VALUES
//! (1, 0)` (`Dialect::create_in`) then takes the next AUTO_INCREMENT
//! value, and a token is "one above the mark, whichever is highest"
//! (src/sql/calls.rs, `fence`). With AUTO_INCREMENT near i64::MAX, no
//! token can be drawn at all; here it is 4·10^18 ns, year 2096.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup. A holder takes `x` and asks for a fencing token.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::mallory::{as_mallory, mallory_with, refused_to_mallory};
use crate::sql_support::MariaServer;

/// Mallory's mark: 4·10^18 ns after the epoch, in 2096.
const PLANTED: u64 = 4_000_000_000_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_table_another_user_made_with_an_auto_increment_token_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config("ai_", Duration::from_secs(60), Duration::ZERO)
    };
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let fence = statements
        .iter()
        .find(|s| s.starts_with("CREATE TABLE IF NOT EXISTS `ai_fence`"))
        .expect("the fence table's statement")
        .clone();
    let tail = "token bigint NOT NULL) ENGINE=InnoDB";
    assert!(fence.contains(tail), "control: the fence columns: {fence}");
    // Same type, nullability and (no) default; a key that is not unique.
    let planted = fence.replace(
        tail,
        &format!(
            "token bigint NOT NULL AUTO_INCREMENT, KEY ai_fence_by_token (token)) \
             ENGINE=InnoDB AUTO_INCREMENT={PLANTED}"
        ),
    );

    let mut mallory = mallory_with(&server, "CREATE").await;
    as_mallory(
        &mut mallory,
        &planted,
        "mallory makes the fence table before any locker (CREATE)",
    )
    .await;
    refused_to_mallory(
        &mut mallory,
        "INSERT INTO ai_fence (id, token) VALUES (1, 5)",
        "mallory has no right to the table's rows",
    )
    .await;
    let _ = mallory.close().await;

    let locker = SqlLocker::new(&server.url(), settings()).expect("a URL");
    let ds = Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner("holder")
        .build()
        .expect("a client");
    let held = match ds
        .rw_mutex(["x"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => {
            // Refusing the table is safe, when the refusal names why.
            let said = refused.to_string();
            assert!(
                said.contains("ai_fence") && said.to_ascii_lowercase().contains("auto_increment"),
                "the lockers refuse the fence table, naming it and its AUTO_INCREMENT: {said}"
            );
            return;
        }
    };
    let token = tokio::time::timeout(Duration::from_secs(10), held.fencing_token())
        .await
        .expect("the fencing call ends");
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64;
    let mark = server.sql("SELECT token FROM ai_fence WHERE id = 1;");
    // The database runs on this machine: its clock is this one's.
    let ahead = Duration::from_secs(3600).as_nanos() as u64;
    assert!(
        matches!(token, Ok(t) if t <= now_ns + ahead),
        "the fencing token {token:?} is not the database's clock ({now_ns} ns here) nor one \
         above a mark a locker wrote: the fence table mallory (CREATE only) made with an \
         AUTO_INCREMENT token started at her mark {}",
        mark.trim()
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), held.unlock()).await;
}
