//! Reproduces a past break: the warning that a new epoch begins (the lock table's marker missing, or written by another server) was written on every call that found it so; a database that answers so every time (a hostile one, or two servers behind one address answering in turn) filled the log with a line a call.
//!
//! Now the line is written at most once a second, with how many calls
//! found it so since the line before (`times`), as the lock server's and
//! the Redis locker's recurring warnings are.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::sql::SqlLocker;
use quorum_lock::{Dsync, NetLocker};

use crate::both::config;
use crate::log_capture::Capture;
use crate::sql_support::MariaServer;

#[tokio::test(flavor = "current_thread")]
async fn a_table_reset_before_every_call_is_logged_at_most_once_a_second() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let (capture, _guard) = Capture::install();
    let locker = SqlLocker::new(
        &server.url(),
        config("reset_", Duration::from_secs(60), Duration::ZERO),
    )
    .expect("a URL");
    let ds = Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner("resetting")
        .build()
        .expect("a client");
    let mutex = ds.rw_mutex(["res"]).expect("a name");
    drop(mutex.try_lock().await.expect("a first lock"));
    let began = Instant::now();
    const CALLS: usize = 12;
    for _ in 0..CALLS {
        server.sql("DELETE FROM reset_entries WHERE kind = 'e'");
        // Refused or granted, each call finds the marker missing.
        let _ = mutex.try_lock().await;
    }
    let took = began.elapsed();
    let lines = capture.containing("epoch marker is missing");
    let allowed = 1 + took.as_secs() as usize + 1;
    assert!(
        !lines.is_empty() && lines.len() <= allowed,
        "{} warnings for {CALLS} calls that each found the marker gone in {took:?} (at most \
         one a second expected): {lines:#?}",
        lines.len()
    );
}
