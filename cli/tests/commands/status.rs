//! `quorum-lock status` against real servers: one healthy and holding a
//! lock, one in quarantine, one down; once, with `--watch --count`, and
//! with a token that is not the admin token; as JSON; and `--health`, the
//! readiness probe that needs only the client token.

use std::time::Duration;

use serde_json::Value;

use crate::support::{cli, dsync, Finished, Scratch, Server, TOKEN};

const LIMIT: Duration = Duration::from_secs(20);

fn status(dir: &Scratch, nodes: &str, extra: &[&str]) -> Finished {
    let admin = dir.admin();
    let mut args = vec!["status", "--nodes", nodes, "--admin-token-file", &admin];
    args.extend_from_slice(extra);
    tokio::task::block_in_place(|| cli(dir, &args, &[], LIMIT))
}

/// The line about `node`.
fn node_line<'a>(shown: &'a str, node: &str) -> &'a str {
    shown
        .lines()
        .find(|l| l.split_whitespace().next() == Some(node))
        .unwrap_or_else(|| panic!("no line for {node} in {shown:?}"))
}

/// The row of a lock on `resource`, split into its columns (none of which
/// holds a space here).
fn lock_row<'a>(shown: &'a str, resource: &str) -> Vec<&'a str> {
    let row = shown
        .lines()
        .find(|l| l.split_whitespace().next() == Some(resource))
        .unwrap_or_else(|| panic!("no lock on {resource} in {shown:?}"));
    row.split_whitespace().collect()
}

/// A duration as the table shows it ("350ms", "12s", "1m 5s").
fn shown_duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// A server on `validity` that is, and stays for the test, in quarantine.
fn quarantined(dir: &Scratch) -> Server {
    // Without --no-quarantine a server refuses grants for its validity
    // after it starts: a minute, longer than any test here.
    Server::start_with_validity(dir, "60s", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_healthy_a_quarantined_and_a_down_server() {
    let dir = Scratch::new("net-status");
    let healthy = Server::start(&dir, &["--no-quarantine"]);
    let careful = quarantined(&dir);
    let mut gone = Server::start(&dir, &["--no-quarantine"]);
    let down = gone.addr.to_string();
    tokio::task::block_in_place(|| gone.kill());

    let ds = dsync(&[healthy.addr], TOKEN, "status-holder").await;
    let guard = ds.rw_mutex(["reports/7"]).unwrap().lock().await.unwrap();

    let (up, waiting) = (healthy.addr.to_string(), careful.addr.to_string());
    let nodes = format!("{up},{waiting},{down}");
    let shown = status(&dir, &nodes, &[]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let out = &shown.stdout;

    // The healthy server, its one entry and the lock on it.
    let line = node_line(out, &up);
    assert!(
        line.ends_with("reachable, protocol 6, not quarantined, 1 entry"),
        "{line:?}"
    );
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("RESOURCE"))
        .unwrap_or_else(|| panic!("no lock table in {out:?}"));
    for column in [
        "RESOURCE",
        "MODE",
        "OWNER",
        "AGE",
        "REFRESHED",
        "UID",
        "SOURCE",
    ] {
        assert!(header.contains(column), "{column} missing from {header:?}");
    }
    let row = lock_row(out, "reports/7");
    assert_eq!(row[1..3], ["write", "status-holder"], "{row:?}");
    assert!(shown_duration(row[3]) < LIMIT, "{row:?}");
    assert!(shown_duration(row[4]) < LIMIT && row[5] == "ago", "{row:?}");
    assert_eq!(row[6], guard.uid(), "{row:?}");
    // The lock is listed under its server, before the next server's line.
    let position = |text: &str| out.find(text).expect("shown");
    assert!(position(&up) < position("reports/7"));
    assert!(position("reports/7") < position(&waiting));

    // The quarantined server says for how much longer.
    let line = node_line(out, &waiting);
    let (before, left) = line
        .split_once("reachable, protocol 6, quarantined, ")
        .unwrap_or_else(|| panic!("{line:?}"));
    assert_eq!(before.trim(), waiting);
    let left = left
        .strip_suffix(" left, 0 entries")
        .unwrap_or_else(|| panic!("{line:?}"));
    let left = shown_duration(left);
    assert!(
        left > Duration::ZERO && left <= Duration::from_secs(60),
        "{line:?}"
    );

    // The down server, and why.
    let line = node_line(out, &down);
    assert!(line.contains("unreachable: cannot connect"), "{line:?}");
    assert_eq!(out.lines().filter(|l| l.contains("unreachable")).count(), 1);

    guard.unlock().await.unwrap();
    let after = status(&dir, &up, &[]);
    assert_eq!(after.code, Some(0), "{after:?}");
    assert!(
        after
            .stdout
            .trim_end()
            .ends_with("not quarantined, 0 entries"),
        "{after:?}"
    );
    assert!(!after.stdout.contains("RESOURCE"), "{after:?}");

    // No server answering is a failure, as for `locks`.
    let none = status(&dir, &down, &[]);
    assert_eq!(none.code, Some(69), "{none:?}");
    assert!(node_line(&none.stdout, &down).contains("unreachable"));
    assert!(none.stderr.contains("no lock server answered"), "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_count_shows_that_many_snapshots() {
    let dir = Scratch::new("net-status-watch");
    let healthy = Server::start(&dir, &["--no-quarantine"]);
    let careful = quarantined(&dir);
    let nodes = format!("{},{}", healthy.addr, careful.addr);
    let shown = status(
        &dir,
        &nodes,
        &["--watch", "--interval", "200ms", "--count", "2"],
    );
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let out = &shown.stdout;
    // Not a terminal: no escape codes, a separator line per snapshot.
    assert!(!out.contains('\x1b'), "{out:?}");
    let separators: Vec<&str> = out.lines().filter(|l| l.starts_with("--- ")).collect();
    assert_eq!(separators.len(), 2, "{out:?}");
    assert!(out.starts_with("--- "), "{out:?}");
    for addr in [healthy.addr, careful.addr] {
        let addr = addr.to_string();
        let lines = out
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(addr.as_str()))
            .count();
        assert_eq!(lines, 2, "{addr} not in both snapshots: {out:?}");
    }
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("protocol 6, quarantined, "))
            .count(),
        2,
        "{out:?}"
    );

    // --count and --interval belong to --watch.
    let usage = status(&dir, &nodes, &["--count", "2"]);
    assert_eq!(usage.code, Some(2), "{usage:?}");
    assert!(usage.stderr.contains("--watch"), "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_needs_the_admin_token_as_locks_does() {
    let dir = Scratch::new("net-status-token");
    let healthy = Server::start(&dir, &["--no-quarantine"]);
    let nodes = healthy.addr.to_string();
    let token = dir.token();
    let run = |command: &str| {
        let args = [command, "--nodes", &nodes, "--token-file", &token];
        tokio::task::block_in_place(|| cli(&dir, &args, &[], LIMIT))
    };
    let status = run("status");
    let locks = run("locks");
    assert_eq!(status.code, Some(77), "{status:?}");
    assert_eq!(locks.code, Some(77), "{locks:?}");
    assert!(status.stdout.is_empty(), "{status:?}");
    let expected = format!(
        "quorum-lock: lock server {nodes} refused to list locks: listing locks needs the \
         admin token; pass --admin-token-file FILE or set QUORUM_LOCK_ADMIN_TOKEN"
    );
    assert_eq!(status.stderr.trim(), expected, "{status:?}");
    assert_eq!(locks.stderr.trim(), expected, "{locks:?}");
}

/// `quorum-lock status --health` with the client token only.
fn health(dir: &Scratch, nodes: &str, extra: &[&str]) -> Finished {
    let token = dir.token();
    let mut args = vec![
        "status",
        "--health",
        "--nodes",
        nodes,
        "--token-file",
        &token,
    ];
    args.extend_from_slice(extra);
    tokio::task::block_in_place(|| cli(dir, &args, &[], LIMIT))
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_health_needs_only_the_client_token_and_a_healthy_write_quorum() {
    let dir = Scratch::new("net-status-health");
    let first = Server::start(&dir, &["--no-quarantine"]);
    let mut second = Server::start(&dir, &["--no-quarantine"]);
    let careful = quarantined(&dir);
    let (a, b, q) = (
        first.addr.to_string(),
        second.addr.to_string(),
        careful.addr.to_string(),
    );
    let nodes = format!("{a},{b},{q}");

    // Two of three healthy: a write quorum, so ready.
    let ready = health(&dir, &nodes, &[]);
    assert_eq!(ready.code, Some(0), "{ready:?}");
    assert_eq!(ready.stdout.lines().count(), 3, "{ready:?}");
    assert!(
        node_line(&ready.stdout, &a).ends_with("  healthy"),
        "{ready:?}"
    );
    assert!(
        node_line(&ready.stdout, &b).ends_with("  healthy"),
        "{ready:?}"
    );
    let line = node_line(&ready.stdout, &q);
    assert!(line.contains("unhealthy: quarantined, "), "{line:?}");
    assert!(line.ends_with(" left"), "{line:?}");
    assert!(ready.stderr.is_empty(), "{ready:?}");

    // One of them down: one healthy of three is not enough.
    tokio::task::block_in_place(|| second.kill());
    let unready = health(&dir, &nodes, &[]);
    assert_eq!(unready.code, Some(69), "{unready:?}");
    let line = node_line(&unready.stdout, &b);
    assert!(
        line.contains("unhealthy: unreachable: cannot connect"),
        "{line:?}"
    );
    for words in ["1 of 3", "2 needed", b.as_str(), "quarantined"] {
        assert!(unready.stderr.contains(words), "{words:?}: {unready:?}");
    }

    // The same as JSON.
    let json = health(&dir, &nodes, &["--output", "json"]);
    assert_eq!(json.code, Some(69), "{json:?}");
    let doc = parse(&json.stdout);
    assert_eq!(doc["view"], "health", "{doc}");
    assert_eq!(doc["healthy"], 1, "{doc}");
    assert_eq!(doc["quorum"], 2, "{doc}");
    assert_eq!(doc["quorum_healthy"], false, "{doc}");
    let listed = doc["nodes"].as_array().expect("nodes");
    let healthy: Vec<bool> = listed
        .iter()
        .map(|n| n["healthy"].as_bool().expect("healthy"))
        .collect();
    assert_eq!(healthy, [true, false, false], "{doc}");
    assert!(listed[0]["locks"].is_null(), "health lists no locks: {doc}");

    // A token the servers do not know: refused, as everywhere.
    std::fs::write(dir.file("token"), "not-the-token\n").expect("write the token");
    let wrong = health(&dir, &a, &[]);
    assert_eq!(wrong.code, Some(77), "{wrong:?}");
    assert!(wrong.stderr.contains("rejected the token"), "{wrong:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_output_json_describes_every_server_and_its_locks() {
    let dir = Scratch::new("net-status-json");
    let healthy = Server::start(&dir, &["--no-quarantine"]);
    let careful = quarantined(&dir);
    let mut gone = Server::start(&dir, &["--no-quarantine"]);
    let down = gone.addr.to_string();
    tokio::task::block_in_place(|| gone.kill());
    let ds = dsync(&[healthy.addr], TOKEN, "json-status-holder").await;
    let guard = ds.rw_mutex(["reports/8"]).unwrap().lock().await.unwrap();

    let nodes = format!("{},{},{down}", healthy.addr, careful.addr);
    let shown = status(&dir, &nodes, &["--output", "json"]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    assert_eq!(shown.stdout.lines().count(), 1, "{shown:?}");
    let doc = parse(&shown.stdout);
    assert_eq!(doc["format"], 1, "{doc}");
    assert_eq!(doc["kind"], "lock-servers", "{doc}");
    assert_eq!(doc["view"], "status", "{doc}");
    assert!(
        doc["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{doc}"
    );
    let listed = doc["nodes"].as_array().expect("nodes");
    assert_eq!(listed.len(), 3, "{doc}");

    let up = &listed[0];
    assert_eq!(up["node"], healthy.addr.to_string().as_str(), "{doc}");
    assert_eq!(
        (&up["reachable"], &up["answered"], &up["healthy"]),
        (&Value::Bool(true), &Value::Bool(true), &Value::Bool(true)),
        "{doc}"
    );
    assert_eq!(up["protocol"], 6, "{doc}");
    assert_eq!(up["quarantined"], false, "{doc}");
    assert!(up["quarantine_left_ms"].is_null(), "{doc}");
    assert_eq!(up["entries"], 1, "{doc}");
    let locks = up["locks"].as_array().expect("locks");
    assert_eq!(locks.len(), 1, "{doc}");
    assert_eq!(locks[0]["resource"], "reports/8", "{doc}");
    assert_eq!(locks[0]["uid"], guard.uid(), "{doc}");
    assert_eq!(locks[0]["owner"], "json-status-holder", "{doc}");
    assert!(locks[0]["refreshed_ms_ago"].as_u64().is_some(), "{doc}");

    let waiting = &listed[1];
    assert_eq!(waiting["quarantined"], true, "{doc}");
    assert_eq!(waiting["healthy"], false, "{doc}");
    let left = waiting["quarantine_left_ms"].as_u64().expect("time left");
    assert!(left > 0 && left <= 60_000, "{doc}");

    let missing = &listed[2];
    assert_eq!(missing["node"], down.as_str(), "{doc}");
    assert_eq!(missing["reachable"], false, "{doc}");
    assert!(
        missing["quarantined"].is_null() && missing["locks"].is_null(),
        "{doc}"
    );
    let reason = missing["reason"].as_str().expect("a reason");
    assert!(reason.contains("cannot connect"), "{doc}");
    assert_eq!(doc["healthy"], 1, "{doc}");
    assert_eq!(doc["quorum_healthy"], false, "{doc}");

    // --watch: JSON Lines, one document per snapshot, nothing between.
    let watched = status(
        &dir,
        &nodes,
        &[
            "--output",
            "json",
            "--watch",
            "--interval",
            "200ms",
            "--count",
            "2",
        ],
    );
    assert_eq!(watched.code, Some(0), "{watched:?}");
    let lines: Vec<&str> = watched.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{watched:?}");
    for line in lines {
        assert_eq!(parse(line)["nodes"].as_array().map(Vec::len), Some(3));
    }
    guard.unlock().await.unwrap();
}
