//! Reproduces a past break: a PostgreSQL password file given as a named pipe (`PGPASSFILE` pointing at a FIFO a secrets tool writes) is read by the driver, which sends its password, but passed over by the locker's lookup, so a login refusal quoting that password shows it whole.
//!
//! docs/sql.md, "Credentials and TLS": "A password the database quotes
//! back (in a login refusal, say) is not shown either: any run of 8 or
//! more of its bytes in text the database sends is shown as `***`. For
//! PostgreSQL that covers the password the driver takes from its password
//! file when neither the URL nor `PGPASSWORD` gives one: the locker looks
//! it up as sqlx 0.8 does, `PGPASSFILE` first and then `~/.pgpass` when
//! that file gives none". Nothing there leaves out a file that is not a
//! regular one.
//!
//! What happens instead: `remember_pgpass` (src/locker/secrets.rs) reads
//! only a regular file ("reading it would take the driver's bytes"), while
//! the driver opens whatever `PGPASSFILE` names (`File::open`), a pipe
//! included, at every parse of the URL, and sends the password it reads
//! there. The locker remembers nothing; the fake server quotes the
//! password in its refusal and the locker's error shows it.
//!
//! A test binary of its own: it sets `PGPASSFILE` and `HOME` (an empty
//! directory, so that no `~/.pgpass` of the machine counts) for its whole
//! process. A thread plays the secrets tool: each time a reader opens the
//! pipe it writes the line once, opening without blocking and trying again
//! every 5 ms, for at most 30 s or until the test ends. The server is the
//! fake of `tests/sql_support/fake_postgres.rs`.
#![cfg(feature = "postgres")]

#[path = "sql_support/fake_postgres.rs"]
mod fake_postgres;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The password the pipe gives.
const PASSWORD: &str = "Fp8wD3nXk6Qs1Jv5";

/// `O_NONBLOCK` on Linux: opening a pipe for writing fails at once while
/// no reader has it open.
const O_NONBLOCK: i32 = 0o4000;

#[tokio::test]
async fn a_refusal_quoting_the_password_of_a_password_file_given_as_a_pipe_does_not_show_it() {
    std::env::remove_var("PGPASSWORD");
    let dir = std::env::temp_dir().join(format!("quorum-lock-pgpass-pipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home")).expect("make the directories");
    let pipe = dir.join("pgpass");
    let made = std::process::Command::new("mkfifo")
        .arg("-m")
        .arg("600")
        .arg(&pipe)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    std::env::set_var("PGPASSFILE", &pipe);
    std::env::set_var("HOME", dir.join("home"));

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (pipe, done) = (pipe.clone(), done.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            while !done.load(Ordering::SeqCst) && Instant::now() < until {
                match std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(O_NONBLOCK)
                    .open(&pipe)
                {
                    Ok(mut file) => {
                        let _ = file.write_all(format!("*:*:*:app:{PASSWORD}\n").as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
    };

    let addr = fake_postgres::refusing_logins();
    let url = format!("postgres://app@{addr}/locks?sslmode=disable");
    let shown = fake_postgres::refusal_shown(&url, addr).await;
    done.store(true, Ordering::SeqCst);
    let _ = writer.join();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        shown.contains("got \\\"") || shown.contains("got \""),
        "not the refusal quoting a password: {shown}"
    );
    fake_postgres::assert_not_shown(PASSWORD, &shown, 8);
}
