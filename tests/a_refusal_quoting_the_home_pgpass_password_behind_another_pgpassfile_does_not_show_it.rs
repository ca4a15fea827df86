//! Reproduces a past break: with `PGPASSFILE` naming a file that gives no password for the connection, the driver falls back to `~/.pgpass` and sends the password it finds there, which the locker never remembers, so a login refusal quoting it shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`"; docs/cli.md,
//! "locks": masked are "the passwords of its node URLs and the database
//! password variables and file".
//!
//! What happens instead: the locker reads one password file, `PGPASSFILE`
//! if set, else `~/.pgpass` (`locker::secrets::remember_pgpass`). The
//! driver (sqlx 0.8, `options/pgpass.rs`, `load_password`) reads
//! `PGPASSFILE` and, when that gives no password (no such file, or no line
//! for this connection), `~/.pgpass` as well. A user whose `PGPASSFILE`
//! holds the lines of other servers has the password of `~/.pgpass` sent,
//! unremembered; a hostile server asking for it in cleartext quotes it
//! into the error every caller logs.
//!
//! A test binary of its own, with this one test: it sets `PGPASSFILE` and
//! `HOME` for its whole process (`HOME` a fresh directory of its own). The
//! server is the fake of
//! `a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.
#![cfg(feature = "postgres")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

/// The password in `~/.pgpass`.
const PASSWORD: &str = "Hm4xT8qZ2wL6rN9v";

/// Reads one length-prefixed message body (after its type byte, if any).
fn read_body(stream: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if !(4..=1 << 16).contains(&len) {
        return None;
    }
    let mut body = vec![0; len - 4];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// Serves one login: declines an `SSLRequest`, reads the startup message,
/// asks for a cleartext password, and refuses what comes, quoting it.
fn serve_one(mut stream: std::net::TcpStream) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut first = read_body(&mut stream)?;
    // SSLRequest (or GSSENCRequest): declined, then the startup message.
    if first.len() == 4 && first[..2] == [0x04, 0xd2] {
        stream.write_all(b"N").ok()?;
        first = read_body(&mut stream)?;
    }
    let _startup = first;
    // AuthenticationCleartextPassword.
    stream.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).ok()?;
    let mut kind = [0u8; 1];
    stream.read_exact(&mut kind).ok()?;
    let password = read_body(&mut stream)?;
    let password = String::from_utf8_lossy(&password)
        .trim_end_matches('\0')
        .to_owned();
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', "FATAL".to_owned()),
        (b'V', "FATAL".to_owned()),
        (b'C', "28P01".to_owned()),
        (
            b'M',
            format!("password authentication failed for user \"app\": got \"{password}\""),
        ),
    ] {
        fields.push(code);
        fields.extend(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut out = vec![b'E'];
    out.extend(((fields.len() + 4) as u32).to_be_bytes());
    out.extend(fields);
    stream.write_all(&out).ok()?;
    Some(())
}

#[tokio::test]
async fn a_refusal_quoting_the_home_pgpass_password_behind_another_pgpassfile_does_not_show_it() {
    std::env::remove_var("PGPASSWORD");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    // `PGPASSFILE`: the lines of another server only. `~/.pgpass`: this
    // connection's. Both readable by their owner only, as libpq requires.
    let home = std::env::temp_dir().join(format!("quorum-lock-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("a home directory");
    let other = home.join("other-servers.pgpass");
    let file = home.join(".pgpass");
    std::fs::write(
        &other,
        "db.elsewhere.example:5432:*:app:ElsewhereOnly1234\n",
    )
    .expect("write PGPASSFILE");
    std::fs::write(&file, format!("*:*:*:app:{PASSWORD}\n")).expect("write ~/.pgpass");
    {
        use std::os::unix::fs::PermissionsExt;
        for path in [&other, &file] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .expect("make the password file private");
        }
    }
    std::env::set_var("PGPASSFILE", &other);
    std::env::set_var("HOME", &home);
    std::thread::spawn(move || {
        // Bounded: a connect makes a few attempts at most.
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            let _ = serve_one(stream);
        }
    });
    let config = SqlConfig {
        call_timeout: Duration::from_secs(3),
        ..SqlConfig::default()
    };
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let result = tokio::time::timeout(Duration::from_secs(20), SqlLocker::connect(&url, config))
        .await
        .expect("connect ends within its timeout");
    let err = match result {
        Ok(_) => panic!("the fake PostgreSQL at {addr} was accepted"),
        Err(err) => err,
    };
    let _ = std::fs::remove_dir_all(&home);
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("28P01") || shown.contains("credentials"),
        "not the refusal: {shown}"
    );
    let shown = err.to_string();
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password of ~/.pgpass ({piece} is a piece of it): {shown}"
        );
    }
}
