//! Reproduces a past break: `quorum-lock` with a PostgreSQL node and logs on writes the malformed line of the password file that the driver logs, password and all, to stderr: the line is logged before anything remembers it for masking.
//!
//! docs/cli.md ("A secret the command holds, quoted back in any of it, is
//! shown as `***`: any run of 8 or more bytes of ... the passwords of its
//! node URLs and the database password variables and file ... The logs
//! (`RUST_LOG`, and the server's) are escaped and masked the same way,
//! line by line"), and docs/sql.md, "Credentials and TLS": "The rest of a
//! malformed line, which the driver logs whole at WARN, is remembered as
//! well."
//!
//! What happens instead: making the locker (`SqlLocker::new`) has the
//! driver (sqlx 0.8) parse the URL, and every parse of a URL without a
//! password reads the password file and logs `Malformed line in pgpass
//! file`, `line` = the whole line, at WARN; the library remembers the rest
//! of that line only afterwards (`remember_pgpass`, after `Store::new`),
//! and outside any masked poll. The command's log writer masks each line
//! as it writes it, when nothing is remembered yet: the password reaches
//! stderr whole.
//!
//! The password file is `PGPASSFILE` of the command's own environment,
//! `HOME` an empty directory; the node is a loopback port nothing listens
//! on (the break comes before any connection). One `status` call, bounded
//! in time.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{bin, Scratch};

/// What a line of the password file holds after its host and port.
const PASSWORD: &str = "Cm3xR7vNq5Lb9Tw2";

#[test]
fn a_malformed_password_file_line_is_not_logged_with_its_password() {
    let dir = Scratch::new("pgpass-malformed-log");
    let home = dir.file("home");
    std::fs::create_dir_all(&home).expect("make the home directory");
    let pgpass = dir.file("pgpass");
    std::fs::write(&pgpass, format!("*:*:{PASSWORD}\n")).expect("write the password file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600))
            .expect("make the password file private");
    }
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("its address")
        .port();
    let url = format!("postgres://app@127.0.0.1:{port}/locks?sslmode=disable");
    let (out, err) = (dir.file("status.out"), dir.file("status.err"));
    let mut child = Command::new(bin())
        .args(["status", "--nodes", &url])
        .env("RUST_LOG", "warn")
        .env("PGPASSFILE", &pgpass)
        .env("HOME", &home)
        .env_remove("PGPASSWORD")
        .env_remove("QUORUM_LOCK_NODES")
        .env_remove("QUORUM_LOCK_REDIS")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn quorum-lock");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("quorum-lock status did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let shown = format!(
        "{}\n{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(
        shown.contains("Malformed line") || shown.contains("quote a secret"),
        "the driver's warning is nowhere: {shown}"
    );
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the output shows the password file's line ({piece} is a piece of it): {shown}"
        );
    }
}
