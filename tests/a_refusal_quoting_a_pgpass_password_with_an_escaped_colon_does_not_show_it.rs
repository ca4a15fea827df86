//! Reproduces a past break: a password in the PostgreSQL password file that holds an escaped colon (`\:`) is remembered unescaped, but the driver sends it as written, backslashes and all, so a login refusal quoting what it got shows the password whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes back
//! (in a login refusal, say) is not shown either: any run of 8 or more of
//! its bytes in text the database sends is shown as `***`"; docs/cli.md,
//! "locks": masked are "the passwords of its node URLs and the database
//! password variables and file".
//!
//! What happens instead: the locker remembers the line of the password
//! file the driver would use with its `\:` and `\\` undone
//! (`locker::secrets::remember_pgpass`, as libpq reads the file). The
//! driver (sqlx 0.8, `options/pgpass.rs`) undoes them only in the first
//! four fields: the password it sends is the rest of the line as written.
//! A hostile server that asks for the password in cleartext gets
//! `Kd7qR2\:Wn5tY8\:Hs3mB6\:Pq9zL4` and quotes it; no run of 8 bytes of
//! that text, with its backslashes, is a run of the remembered
//! `Kd7qR2:Wn5tY8:Hs3mB6:Pq9zL4`, so nothing is masked, and the error
//! every caller logs shows the password (undoing its escapes is trivial).
//!
//! A test binary of its own, with this one test: it sets `PGPASSFILE` for
//! its whole process. The server is the fake of
//! `a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it`:
//! it declines TLS, asks for a cleartext password, and refuses it quoting
//! it. One thread, a bounded number of connections, every read bounded in
//! time.
#![cfg(feature = "postgres")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use quorum_lock::sql::{SqlConfig, SqlLocker};

/// The password field of the password file, as written: three colons in
/// it, each escaped as the file's format asks.
const PASSWORD: &str = r"Kd7qR2\:Wn5tY8\:Hs3mB6\:Pq9zL4";

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
async fn a_refusal_quoting_a_pgpass_password_with_an_escaped_colon_does_not_show_it() {
    std::env::remove_var("PGPASSWORD");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake PostgreSQL");
    let addr = listener.local_addr().expect("its address");
    // The password file, readable by its owner only, as libpq requires.
    let file =
        std::env::temp_dir().join(format!("quorum-lock-pgpass-colon-{}", std::process::id()));
    std::fs::write(&file, format!("*:*:*:app:{PASSWORD}\n")).expect("write the password file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
            .expect("make the password file private");
    }
    std::env::set_var("PGPASSFILE", &file);
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
    let _ = std::fs::remove_file(&file);
    let shown = format!("{err:?} / {err}");
    assert!(
        shown.contains("28P01") || shown.contains("credentials"),
        "not the refusal: {shown}"
    );
    // What the server got, and quoted: the password as the driver sent it.
    let shown = err.to_string();
    for piece in PASSWORD.as_bytes().windows(8) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        assert!(
            !shown.contains(piece),
            "the error shows the password from the password file ({piece} is a piece of \
             it as the driver sent it): {shown}"
        );
    }
}
