//! An admin reserve larger than the open-files limit. `ServerConfig`'s
//! rustdoc (`max_connections`): "With `admin_reserve`, also bounds the
//! connections served at once, authenticated or not (`max_connections +
//! admin_reserve`), so that the server never runs out of file
//! descriptors"; the `--max-connections` help: "Lowered to fit the
//! open-files limit (ulimit -n)". The command line accepts any
//! `--admin-reserve`; a reserve beyond the descriptors lets silent
//! connections take them all, and then nobody, the admin included, is
//! accepted until their handshake timeout ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{bin, Scratch, ADMIN};

/// The server process, killed by its pid when dropped.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_reserve_beyond_the_open_files_does_not_let_silent_connections_exhaust_them() {
    let dir = Scratch::new("reserve-beyond-files");
    let log = dir.file("server.log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 128 && exec \"$0\" \"$@\"")
        .arg(bin())
        .args(["server", "--listen", "127.0.0.1:0"])
        .args([
            "--token-file",
            &dir.token(),
            "--admin-token-file",
            &dir.admin(),
        ])
        .args(["--no-quarantine", "--admin-reserve", "1000"])
        .env("RUST_LOG", "info")
        .env_remove("QUORUM_LOCK_TOKEN")
        .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn sh");
    let stdout = child.stdout.take().unwrap();
    let started = Started(child);
    let mut line = String::new();
    // A server that refused the setting is fine: nothing to exhaust.
    if BufReader::new(stdout).read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .expect("address")
        .to_owned();

    // 200 silent connections, bounded in time.
    let begun = Instant::now();
    let mut silent = Vec::new();
    while silent.len() < 200 && begun.elapsed() < Duration::from_secs(5) {
        if let Ok(stream) = TcpStream::connect(&addr) {
            silent.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(300));

    let outcome = (|| {
        let mut admin = TcpStream::connect(&addr)?;
        admin.set_read_timeout(Some(Duration::from_secs(3)))?;
        admin.write_all(&frame(&hello(VERSION, ADMIN.as_bytes())))?;
        let mut header = [0u8; 4];
        admin.read_exact(&mut header)?;
        let mut payload = vec![0; (u32::from_be_bytes(header) as usize).min(1 << 16)];
        admin.read_exact(&mut payload)?;
        Ok::<_, std::io::Error>(payload)
    })();
    drop(silent);
    drop(started);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let accepted = matches!(&outcome, Ok(welcome) if welcome.first() == Some(&0));
    assert!(
        accepted && !log.contains("accept failed"),
        "with --admin-reserve 1000 under ulimit -n 128 the server ran out of descriptors \
         (admin: {outcome:?}):\n{log}"
    );
}
