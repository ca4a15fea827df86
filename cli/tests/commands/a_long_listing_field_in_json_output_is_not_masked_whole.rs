//! Reproduces a past break: `quorum-lock locks --output json` against a lock server whose listing holds a source of two megabytes searches the whole field for every secret the command holds, for seconds, where the text output now masks and shows only its first 8 KiB.
//!
//! docs/cli.md, "What the nodes send is shown escaped": secrets are masked
//! "in the text and JSON output", and "a piece of text longer than 8 KiB
//! (a cell, a message, a log line) is shown up to there, then `… (cut; N
//! bytes in all)`: a node's megabytes cost the command no more than that".
//!
//! What happens instead: the JSON writer (cli/src/json.rs, `Escaping`)
//! gathers each string whole and hands it to `quorum_lock::mask_secrets`
//! over its whole length; the 8 KiB bound of `words::escaped` is not on
//! that path. With a password file of 64 malformed lines (each remembered)
//! and a PostgreSQL node beside the lock server, a source of about 2 MiB
//! is searched for each of some 70 secrets, and printed whole.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames; the PostgreSQL node is a port nothing listens on.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::support::wire::{
    duration, frame, read_varint, string, varint, OP_HEALTH, OP_LIST, OP_STATUS, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS,
};
use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(300);

/// `Reply::Locks` variant index.
const REPLY_LOCKS: u8 = 1;
/// `ErrorKind::Unavailable`.
const KIND_UNAVAILABLE: u8 = 2;

fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = u32::from_be_bytes(header) as usize;
    if len > 1 << 20 {
        return None;
    }
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some(payload)
}

fn serve(mut stream: TcpStream, owner_len: usize) -> Option<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    read_frame(&mut stream)?;
    // Accepted { version: 5, admin: true, validity: 6s }.
    let mut welcome = vec![0];
    welcome.extend(varint(5));
    welcome.push(1);
    welcome.extend(duration(Duration::from_secs(6)));
    stream.write_all(&frame(&welcome)).ok()?;
    for _ in 0..16 {
        let request = read_frame(&mut stream)?;
        let (id, rest) = read_varint(&request)?;
        let mut reply = varint(id);
        match rest.first().copied() {
            Some(OP_LIST) => {
                reply.push(REPLY_LOCKS);
                reply.extend(varint(1));
                let source = "s".repeat(owner_len);
                // resource, uid, owner, source
                for text in ["reports", "uid-1", "ops", source.as_str()] {
                    reply.extend(string(text.as_bytes()));
                }
                reply.push(1); // Write
                reply.extend(duration(Duration::from_secs(3)));
                reply.extend(duration(Duration::from_secs(1)));
            }
            Some(OP_STATUS) => reply.extend([REPLY_STATUS, 0, 1]),
            Some(OP_HEALTH) => reply.extend([REPLY_HEALTH, 0, 1]),
            _ => {
                reply.extend([REPLY_ERROR, KIND_UNAVAILABLE]);
                reply.extend(string(b"not served here"));
            }
        }
        stream.write_all(&frame(&reply)).ok()?;
    }
    Some(())
}

/// How long `locks --per-node` takes against a stand-in whose one lock has
/// a source of `owner_len` bytes, beside a PostgreSQL node nobody answers
/// for and a password file of 64 malformed lines.
fn listing_time(dir: &Scratch, tag: &str, owner_len: usize) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
    let node = listener.local_addr().expect("its address").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve(stream, owner_len));
        }
    });
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("its address")
        .port();
    let pg = format!("postgres://app@127.0.0.1:{port}/locks?sslmode=disable");
    let nodes = format!("{node},{pg}");
    let (admin, pgpass, home) = (dir.admin(), dir.file("pgpass"), dir.file("home"));
    let started = Instant::now();
    let shown = cli(
        dir,
        &[
            "locks",
            "--per-node",
            "--output",
            "json",
            "--nodes",
            &nodes,
            "--admin-token-file",
            &admin,
        ],
        &[
            ("PGPASSFILE", pgpass.to_str().expect("utf-8")),
            ("HOME", home.to_str().expect("utf-8")),
        ],
        LIMIT,
    );
    let took = started.elapsed();
    assert!(
        shown.stdout.contains("reports"),
        "{tag}: not listed: code {:?}, stderr {}",
        shown.code,
        shown.stderr.chars().take(2000).collect::<String>()
    );
    took
}

#[test]
fn a_long_listing_field_in_json_output_is_not_masked_whole() {
    let dir = Scratch::new("long-listing-field-json");
    std::fs::create_dir_all(dir.file("home")).expect("make the home directory");
    let lines: String = (0..64)
        .map(|i| format!("*:*:pw-{i:03}-Kq7mZ2xV9nB4\n"))
        .collect();
    std::fs::write(dir.file("pgpass"), lines).expect("write the password file");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.file("pgpass"), std::fs::Permissions::from_mode(0o600))
            .expect("make the password file private");
    }
    let short = listing_time(&dir, "short source", 8);
    let long = listing_time(&dir, "long source", (2 << 20) - 4096);
    assert!(
        long < short + Duration::from_secs(2),
        "a source of 2 MiB took {long:?} to list as JSON, one of 8 bytes {short:?}"
    );
}
