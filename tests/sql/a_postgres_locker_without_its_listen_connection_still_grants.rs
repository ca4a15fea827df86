//! Reproduces a past break: on PostgreSQL, `lock()` never succeeded while the locker could not open its LISTEN connection (here a role whose connection limit equals the pool size), even on a free name: every waiting call first waited up to the call timeout (5 s) for the listener, and the coordinator cuts each call at its acquire timeout (1 s).
//!
//! The waits' re-checks stand in for notices while the listener is down
//! (docs/sql.md, "Waiting"), so a wait must go on without it: only the
//! listener's first attempt is worth waiting for.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};
use quorum_lock::{Dsync, NetLocker};

use crate::sql_support::PgServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_granted_while_the_listen_connection_cannot_be_opened() {
    let Some(server) = PgServer::start() else {
        return;
    };
    server.psql(
        "CREATE ROLE limited LOGIN CONNECTION LIMIT 1; \
         GRANT ALL ON DATABASE quorum TO limited; \
         GRANT ALL ON SCHEMA public TO limited;",
    );
    let settings = SqlConfig {
        table_prefix: "unheard_".into(),
        // The role's one connection is the pool's, opened by `connect`
        // and kept: the listener never finds one. (With a limit equal to a
        // larger pool, the listener could take a slot the pool then failed
        // to open, and a later call failed for it.)
        pool_size: 1,
        ..SqlConfig::default()
    };
    let locker = SqlLocker::connect(&server.url_as("limited", "unused"), settings)
        .await
        .expect("a database");
    let ds = Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .build()
        .expect("a client");
    let mutex = ds.rw_mutex(["free"]).expect("a name");
    let first = mutex.try_lock().await.expect("a free name, tried");
    first.unlock().await.expect("released");
    let granted = tokio::time::timeout(
        Duration::from_secs(20),
        mutex.lock_timeout(Duration::from_secs(10)),
    )
    .await
    .expect("bounded");
    let guard = granted.unwrap_or_else(|e| {
        panic!("a free name was not granted while the LISTEN connection was out of reach: {e}")
    });
    guard.unlock().await.expect("released");
}
