//! Reproduces a past break: a lock server whose listing holds a source of two megabytes held `quorum-lock locks` for seconds (38 s as text, 40 s as JSON, beside 64 remembered secrets), the whole field searched for every secret before it was printed whole.
//!
//! docs/cli.md, "What the nodes send is shown escaped": secrets are masked
//! in the text and JSON output, and "a piece of text longer than 8 KiB (a
//! cell, a message, a log line) is shown up to there, then `… (cut; N bytes
//! in all)`: a node's megabytes cost the command no more than that". With
//! a password file of 64 malformed lines (each remembered) and a
//! PostgreSQL node beside the lock server, the command searched a source
//! of about 2 MiB for each of some 70 secrets. The check is on what is
//! printed (the cut, and no more than its head), not on time.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames; the PostgreSQL node is a port nothing listens on.

use std::time::Duration;

use crate::support::listing::listing_server;
use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(300);

/// What `locks --per-node` (with `extra` arguments) prints against a
/// stand-in whose one lock has a source of `source_len` bytes, beside a
/// PostgreSQL node nobody answers for and a password file of 64 malformed
/// lines.
fn listing(dir: &Scratch, extra: &[&str], source_len: usize) -> String {
    let node = listing_server("ops".to_owned(), "s".repeat(source_len));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("its address")
        .port();
    let pg = format!("postgres://app@127.0.0.1:{port}/locks?sslmode=disable");
    let nodes = format!("{node},{pg}");
    let (admin, pgpass, home) = (dir.admin(), dir.file("pgpass"), dir.file("home"));
    let mut args = vec![
        "locks",
        "--per-node",
        "--nodes",
        &nodes,
        "--admin-token-file",
        &admin,
    ];
    args.extend_from_slice(extra);
    let shown = cli(
        dir,
        &args,
        &[
            ("PGPASSFILE", pgpass.to_str().expect("utf-8")),
            ("HOME", home.to_str().expect("utf-8")),
        ],
        LIMIT,
    );
    assert!(
        shown.stdout.contains("reports"),
        "{extra:?}: not listed: code {:?}, stderr {}",
        shown.code,
        shown.stderr.chars().take(2000).collect::<String>()
    );
    shown.stdout
}

/// A scratch folder with a home and a password file of 64 malformed
/// lines, each a secret the command remembers.
fn scratch(tag: &str) -> Scratch {
    let dir = Scratch::new(tag);
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
    dir
}

/// The source's length: 2 MiB less a little, so that the reply fits the
/// frame limit.
const SOURCE_LEN: usize = (2 << 20) - 4096;

fn assert_cut(output: &str, what: &str) {
    let cut = format!("(cut; {SOURCE_LEN} bytes in all)");
    assert!(
        output.contains(&cut),
        "{what}: the source is not cut at 8 KiB saying {cut:?}: {} bytes printed",
        output.len()
    );
    assert!(
        output.len() < 64 * 1024,
        "{what}: {} bytes printed for a source of {SOURCE_LEN}",
        output.len()
    );
}

#[test]
fn a_long_listing_field_is_printed_without_masking_it_whole() {
    let dir = scratch("long-listing-field");
    assert_cut(&listing(&dir, &[], SOURCE_LEN), "text output");
}

#[test]
fn a_long_listing_field_in_json_output_is_not_masked_whole() {
    let dir = scratch("long-listing-field-json");
    assert_cut(
        &listing(&dir, &["--output", "json"], SOURCE_LEN),
        "JSON output",
    );
}
