//! An open-files limit below what the command line sets aside for itself.
//! `ServerConfig`'s rustdoc (`max_connections`): the slots bound the
//! connections served at once "so that the server never runs out of file
//! descriptors"; the `--max-connections` and `--admin-reserve` help:
//! "Lowered to fit the open-files limit (ulimit -n)". A limit too small
//! for even one connection must be refused at start, or fitted so that a
//! flood of silent connections never makes `accept` fail.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{LimitedServer, Scratch};

#[test]
fn a_tiny_open_files_limit_is_refused_or_never_runs_out_of_descriptors() {
    let dir = Scratch::new("tiny-open-files");
    let server = LimitedServer::start(&dir, 12, &["--no-quarantine"]);
    // A server that refused the setting is fine: nothing to exhaust.
    let Some(addr) = server.addr else {
        return;
    };

    // 200 silent connections, bounded in time.
    let begun = Instant::now();
    let mut silent = Vec::new();
    while silent.len() < 200 && begun.elapsed() < Duration::from_secs(5) {
        if let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            silent.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(silent);
    let log = server.log.clone();
    drop(server);
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        !log.contains("accept failed"),
        "under ulimit -n 12 the server started and ran out of descriptors:\n{log}"
    );
}
