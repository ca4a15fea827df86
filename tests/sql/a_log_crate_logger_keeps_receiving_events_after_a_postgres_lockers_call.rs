//! Reproduces a past break: one call of a PostgreSQL locker, even one that never reaches a database, stops every `tracing` event of the whole process from reaching an application's `log` logger, for good.
//!
//! docs/sql.md, "Credentials and TLS": while the locker's calls drive the
//! driver, "the thread's tracing dispatcher is one of the locker's own that
//! passes every span and event on, unchanged, to the dispatcher that was
//! the thread's default when the poll began (the application's) [...] The
//! application's subscriber is never replaced or filtered."
//!
//! What happens instead: an application that logs through the `log` crate
//! (env_logger, syslog, ...) gets the `tracing` events of every library,
//! its own and quorum_lock's included, through tracing's `log` feature
//! (which the PostgreSQL driver turns on): tracing hands an event to `log`
//! as long as no tracing dispatcher was ever set in the process
//! (`tracing::dispatcher::has_been_set`). The masking sets one as the
//! thread's default for each poll of the locker's futures
//! (`src/sql/server_notices.rs`, `Masked::poll`), which marks the process
//! as having one for ever: from the first call on, no `tracing` event of
//! any thread reaches the `log` logger again (the locker's own warnings
//! and the notices it logs masked included). Nothing the application set
//! up was replaced, yet all of it is silenced.
//!
//! Whether a dispatcher was ever set is process-wide, and the other tests
//! of this binary set some, so the test runs itself again in a child
//! process (only this test, with `QUORUM_LOCK_LOG_CRATE_CHILD` set) and
//! reads its outcome. The locker connects to a loopback port nobody
//! listens on; every wait is bounded.
#![cfg(feature = "postgres")]

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use quorum_lock::sql::{SqlConfig, SqlLocker};
use tracing::log;

/// Set in the child process, which does the work.
const CHILD: &str = "QUORUM_LOCK_LOG_CRATE_CHILD";

/// The application's `log` logger: keeps every record's target and text.
struct Keep(Mutex<Vec<String>>);

impl log::Log for Keep {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {}", record.target(), record.args());
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    }

    fn flush(&self) {}
}

static KEPT: Keep = Keep(Mutex::new(Vec::new()));

fn kept() -> Vec<String> {
    KEPT.0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The child's part: the application's logger gets an event before the
/// locker's call, and should get one after it.
async fn child() {
    log::set_logger(&KEPT).expect("the only logger of the child process");
    log::set_max_level(log::LevelFilter::Trace);
    assert!(
        !tracing::dispatcher::has_been_set(),
        "a tracing dispatcher was set before the test began"
    );
    tracing::warn!(target: "the_application", "before the call");
    assert!(
        kept().iter().any(|l| l.contains("before the call")),
        "tracing hands no event to the log logger in this build at all: {:#?}",
        kept()
    );

    // A loopback port nobody listens on: the call fails at once.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    };
    let config = SqlConfig {
        call_timeout: Duration::from_secs(2),
        ..SqlConfig::default()
    };
    let url = format!("postgres://app:Zq7pW2xK9mN4vB8c@127.0.0.1:{port}/locks?sslmode=disable");
    let result = tokio::time::timeout(Duration::from_secs(10), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    assert!(result.is_err(), "nothing listens on 127.0.0.1:{port}");

    tracing::warn!(target: "the_application", "after the call, same thread");
    std::thread::spawn(|| {
        tracing::warn!(target: "the_application", "after the call, another thread");
    })
    .join()
    .expect("the thread logs");
    let lines = kept();
    // Whether tracing now counts a dispatcher as set (it then no longer
    // hands events to `log`): the application set none.
    let set = tracing::dispatcher::has_been_set();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("after the call, same thread")),
        "the application's log logger got nothing logged on this thread after one call of a \
         PostgreSQL locker (a tracing dispatcher counted as set: {set}): {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("after the call, another thread")),
        "the application's log logger got nothing logged on another thread after one call of \
         a PostgreSQL locker (a tracing dispatcher counted as set: {set}): {lines:#?}"
    );
}

#[tokio::test]
async fn a_log_crate_logger_keeps_receiving_tracing_events_after_a_postgres_lockers_call() {
    if std::env::var_os(CHILD).is_some() {
        child().await;
        return;
    }
    // This test's name as the harness knows it: the path without the
    // crate's name.
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, rest)| rest);
    let name = format!(
        "{module}::a_log_crate_logger_keeps_receiving_tracing_events_after_a_postgres_lockers_call"
    );
    let exe = std::env::current_exe().expect("this test binary");
    let mut child = Command::new(exe)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run this test again in a child process");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child process ran over 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let output = child.wait_with_output().expect("the child's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child did not run exactly this test: {stdout}\n{stderr}"
    );
}
