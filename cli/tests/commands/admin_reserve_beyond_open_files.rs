//! An admin reserve larger than the open-files limit. `ServerConfig`'s
//! rustdoc (`max_connections`): "With `admin_reserve`, also bounds the
//! connections served at once, authenticated or not (`max_connections +
//! admin_reserve`), so that the server never runs out of file
//! descriptors"; the `--max-connections` help: "Lowered to fit the
//! open-files limit (ulimit -n)". The command line accepts any
//! `--admin-reserve`; a reserve beyond the descriptors lets silent
//! connections take them all, and then nobody, the admin included, is
//! accepted until their handshake timeout ends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::wire::{frame, hello, VERSION};
use crate::support::{LimitedServer, Scratch, ADMIN};

#[test]
fn a_reserve_beyond_the_open_files_does_not_let_silent_connections_exhaust_them() {
    let dir = Scratch::new("reserve-beyond-files");
    let server = LimitedServer::start(&dir, 128, &["--no-quarantine", "--admin-reserve", "1000"]);
    // A server that refused the setting is fine: nothing to exhaust.
    let Some(addr) = server.addr else {
        return;
    };

    // 200 silent connections, bounded in time.
    let begun = Instant::now();
    let mut silent = Vec::new();
    while silent.len() < 200 && begun.elapsed() < Duration::from_secs(5) {
        if let Ok(stream) = TcpStream::connect(addr) {
            silent.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(300));

    let outcome = (|| {
        let mut admin = TcpStream::connect(addr)?;
        admin.set_read_timeout(Some(Duration::from_secs(3)))?;
        admin.write_all(&frame(&hello(VERSION, ADMIN.as_bytes())))?;
        let mut header = [0u8; 4];
        admin.read_exact(&mut header)?;
        let mut payload = vec![0; (u32::from_be_bytes(header) as usize).min(1 << 16)];
        admin.read_exact(&mut payload)?;
        Ok::<_, std::io::Error>(payload)
    })();
    drop(silent);
    let log = server.log.clone();
    drop(server);
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let accepted = matches!(&outcome, Ok(welcome) if welcome.first() == Some(&0));
    assert!(
        accepted && !log.contains("accept failed"),
        "with --admin-reserve 1000 under ulimit -n 128 the server ran out of descriptors \
         (admin: {outcome:?}):\n{log}"
    );
}
