//! Reproduces a past break: on MariaDB, a client process stopped in the middle of a call kept the row locks of its open transaction for as long as the server keeps an idle session (8 hours by default), blocking every other call on that name; PostgreSQL freed them within twice the call timeout.
//!
//! The locker bounds how long a lock wait may take (`innodb_lock_wait_timeout`),
//! but nothing bounded a transaction left idle. Here the child process's
//! lock call on `a` waits for a row lock the test holds; the test stops
//! the child (SIGSTOP) while it waits and then lets the row go. The
//! child's statement completes on the server, and its transaction, idle
//! from then on, holds `a`'s rows. Another client's calls on `a` must be
//! served again within a few seconds (the child's idle transaction ended
//! at twice its call timeout), not fail for as long as the child is
//! stopped.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockArgs, NetLocker};
use tokio::time::{sleep, Instant};

use crate::both::config;
use crate::sql_support::MariaServer;

const CHILD_URL: &str = "QUORUM_LOCK_SQL_STOPPED_CHILD_URL";
const PREFIX: &str = "stopped_";
/// The child's call timeout: its lock waits last up to 3 s, and an idle
/// transaction of its sessions at most twice that.
const CHILD_CALL_TIMEOUT: Duration = Duration::from_secs(3);

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["a".to_owned()].into(),
        owner: "test".into(),
        source: "tests/sql/a_stopped_caller_on_mariadb_frees_its_rows.rs".into(),
        quorum: 1,
    }
}

/// The child process of the test below: one lock call on `a`, which the
/// test stops while it waits.
#[tokio::test]
#[ignore = "the child process the test below starts; not a test of its own"]
async fn stopped_caller_child() {
    let url = std::env::var(CHILD_URL).expect("started by the parent test");
    let mut settings = config(PREFIX, Duration::from_secs(60), Duration::ZERO);
    settings.call_timeout = CHILD_CALL_TIMEOUT;
    let locker = SqlLocker::connect(&url, settings)
        .await
        .expect("a database");
    // Connected: the parent says when to call.
    println!("ready");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("the parent's go");
    let _ = locker.lock(&args("child")).await;
    sleep(Duration::from_secs(60)).await;
}

/// Kills and reaps the child when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_stopped_mid_call_on_mariadb_frees_its_rows() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let server = Arc::new(server);
    let mut settings = config(PREFIX, Duration::from_secs(60), Duration::ZERO);
    settings.call_timeout = Duration::from_secs(1);
    let locker = SqlLocker::connect(&server.url(), settings)
        .await
        .expect("a database");
    // The tables, and `a`'s resource row, exist.
    assert!(locker.lock(&args("first")).await.expect("a lock"));
    assert!(locker.unlock(&args("first")).await.expect("a release"));

    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "a_stopped_caller_on_mariadb_frees_its_rows::stopped_caller_child",
            "--include-ignored",
            "--nocapture",
            "--quiet",
        ])
        .env(CHILD_URL, server.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child process");
    let mut go = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let child = Child(child);
    let pid = i32::try_from(child.0.id()).expect("a pid");
    let ready = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .any(|l| l.is_ok_and(|l| l.trim() == "ready"))
    });
    assert!(
        tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .expect("the child connects in time")
            .expect("read the child"),
        "the child connected"
    );

    // Holds `a`'s resource row for 1.5 s, as a call of another client
    // would for a moment.
    let holder = server.clone();
    let held = std::thread::spawn(move || {
        holder.sql(&format!(
            "BEGIN; INSERT INTO {PREFIX}entries (name, uid, kind) VALUES ('a', '', 'r') \
             ON DUPLICATE KEY UPDATE kind = 'r'; SELECT SLEEP(1.5); ROLLBACK;"
        ))
    });
    let began = Instant::now();
    while server
        .sql("SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(1.5)%'")
        .trim()
        == "0"
    {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the holding session never ran"
        );
        sleep(Duration::from_millis(10)).await;
    }
    writeln!(go, "go").expect("the child reads its go");
    // Stopped while its call waits for the row lock.
    let began = Instant::now();
    loop {
        let waiting = server.sql(
            "SELECT COUNT(*) FROM information_schema.processlist \
             WHERE user = 'quorum' AND info LIKE 'INSERT%'",
        );
        if waiting.trim() != "0" {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "the child's call never waited for the row"
        );
        sleep(Duration::from_millis(10)).await;
    }
    // SAFETY: a plain signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP");
    held.join().expect("the holding session ran");
    let released = Instant::now();

    // The child's statement went through once the row was free; its
    // transaction now sits idle holding `a`'s rows. Another client's calls
    // on `a` fail (a lock wait timeout) until that transaction ends.
    let mut last = None;
    let served = loop {
        match locker.lock(&args("after")).await {
            Ok(granted) => break Some(granted),
            Err(err) => last = Some(err),
        }
        if released.elapsed() > Duration::from_secs(20) {
            break None;
        }
        sleep(Duration::from_millis(200)).await;
    };
    let waited = released.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    drop(child);
    assert!(
        served.is_some(),
        "calls on `a` still failed {waited:?} after the stopped child's transaction went \
         idle (its call timeout is {CHILD_CALL_TIMEOUT:?}); the last: {last:?}"
    );
}
