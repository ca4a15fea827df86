//! The test servers themselves: they answer, keep what was committed
//! through a crash (SIGKILL) and a clean restart, and stop answering while
//! paused. The lockers' tests rely on each of these.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use crate::sql_support::{MariaServer, PgServer};

/// The state letter of `pid` in /proc (`T` when stopped).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server's stat");
    // "pid (comm) S ...": the state follows the last ')'.
    let after = &stat[stat.rfind(')').expect("a comm field") + 1..];
    after.trim_start().chars().next().expect("a state")
}

/// True when nothing arrives on a new connection to `port` within
/// `within`: a live MariaDB greets a client first.
fn silent(port: u16, within: Duration) -> bool {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("the port stays open");
    conn.set_read_timeout(Some(within)).unwrap();
    conn.read(&mut [0u8; 1]).is_err()
}

#[test]
fn postgres_keeps_committed_rows_through_a_crash_restart() {
    let Some(mut pg) = PgServer::start() else {
        return;
    };
    assert!(pg.url().ends_with(&format!(":{}/quorum", pg.port())));
    assert_eq!(pg.psql("SELECT 1").trim(), "1");
    pg.psql("CREATE TABLE t(x int); INSERT INTO t VALUES (1), (2);");
    let before = pg.pid();
    pg.restart();
    assert_ne!(pg.pid(), before, "a new postmaster");
    assert_eq!(pg.psql("SELECT sum(x) FROM t").trim(), "3");
    // Errors come back with psql's message.
    let err = pg.try_psql("SELECT * FROM missing").unwrap_err();
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn postgres_restarts_cleanly_and_pauses() {
    let Some(mut pg) = PgServer::start() else {
        return;
    };
    pg.psql("CREATE TABLE t(x int, y text); INSERT INTO t VALUES (7, 'seven');");
    pg.restart_clean();
    assert_eq!(pg.psql("SELECT x, y FROM t"), "7\tseven\n");
    pg.pause();
    assert_eq!(state(pg.pid()), 'T');
    pg.resume();
    assert_eq!(pg.psql("SELECT count(*) FROM t").trim(), "1");
    pg.kill();
    pg.restart();
    assert_eq!(pg.psql("SELECT y FROM t").trim(), "seven");
}

#[test]
fn mariadb_keeps_committed_rows_through_a_crash_restart() {
    let Some(mut db) = MariaServer::start() else {
        return;
    };
    assert_eq!(
        db.url(),
        format!("mysql://quorum:quorum-pass@127.0.0.1:{}/quorum", db.port())
    );
    assert_eq!(db.sql("SELECT 1;").trim(), "1");
    // The URL's user gets in over TCP with its password, and only with it.
    let as_quorum = |password: &str| {
        std::process::Command::new("mariadb")
            .args(["--no-defaults", "-h127.0.0.1", "-uquorum", "quorum"])
            .arg(format!("-P{}", db.port()))
            .arg(format!("-p{password}"))
            .args(["-e", "SELECT current_user()"])
            .output()
            .expect("run the mariadb client")
    };
    assert!(as_quorum("quorum-pass").status.success());
    assert!(!as_quorum("wrong").status.success());
    db.sql("CREATE TABLE t(x int) ENGINE=InnoDB; INSERT INTO t VALUES (1), (2);");
    let before = db.pid();
    db.restart();
    assert_ne!(db.pid(), before, "a new mariadbd");
    assert_eq!(db.sql("SELECT sum(x) FROM t;").trim(), "3");
    let err = db.try_sql("SELECT * FROM missing;").unwrap_err();
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn mariadb_restarts_cleanly_and_pauses() {
    let Some(mut db) = MariaServer::start() else {
        return;
    };
    db.sql("CREATE TABLE t(x int, y text); INSERT INTO t VALUES (7, 'seven');");
    db.restart_clean();
    assert_eq!(db.sql("SELECT x, y FROM t;"), "7\tseven\n");
    db.pause();
    assert_eq!(state(db.pid()), 'T');
    // MariaDB greets first: a paused server says nothing.
    assert!(silent(db.port(), Duration::from_millis(300)));
    db.resume();
    assert_eq!(db.sql("SELECT count(*) FROM t;").trim(), "1");
}
