//! `quorum-lock server --metrics`: a real server serves Prometheus text
//! over HTTP, and its counters and gauges follow what clients did: requests
//! by op and result, connections, a refused token, a wait refused by the
//! waiters limit, and the table's gauges.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::RemoteLocker;
use quorum_lock::{
    Error, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::support::{cli, remote_config, Finished, Scratch, Server, TOKEN, VALIDITY};

const LIMIT: Duration = Duration::from_secs(20);

/// A port nothing listens on (bound and released).
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("bound address")
}

/// A server with its metrics on a free port. The port is free when picked
/// but could be taken before the server binds it, so a failed start is
/// tried again on another port, a few times.
fn start_with_metrics(dir: &Scratch, extra: &[&str]) -> (Server, SocketAddr) {
    let mut last = String::new();
    for _ in 0..3 {
        let metrics = free_port();
        let addr = metrics.to_string();
        let mut args = vec!["--metrics", &addr];
        args.extend_from_slice(extra);
        match Server::try_start(dir, "127.0.0.1:0", VALIDITY, &args) {
            Ok(server) => return (server, metrics),
            Err(err) => last = err,
        }
    }
    panic!("no server with --metrics started: {last}");
}

/// GET /metrics over a plain HTTP/1.1 connection; the body.
async fn scrape(addr: SocketAddr) -> String {
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .expect("the metrics endpoint answers within 5 s")
        .expect("the metrics endpoint answers");
    let response = String::from_utf8(response).expect("a text response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .expect("an HTTP response with a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// Every sample of a Prometheus text exposition, by metric name and its
/// sorted labels.
#[derive(Debug)]
struct Samples(HashMap<(String, Vec<(String, String)>), f64>);

impl Samples {
    fn parse(text: &str) -> Samples {
        let mut samples = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let value: f64 = value.parse().expect("a sample value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let mut labels: Vec<(String, String)> = labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (k, v) = l.split_once('=').expect("label=value");
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            labels.sort();
            samples.insert((name.to_owned(), labels), value);
        }
        Samples(samples)
    }

    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        labels.sort();
        self.0.get(&(name.to_owned(), labels)).copied()
    }

    /// A sample that must exist.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?} in {self:?}"))
    }

    fn requests(&self, op: &str, result: &str) -> f64 {
        self.value(
            "quorum_lock_server_requests_total",
            &[("op", op), ("result", result)],
        )
    }

    fn no_label_values(&self) -> impl Iterator<Item = &str> {
        self.0
            .keys()
            .flat_map(|(_, labels)| labels.iter().map(|(_, v)| v.as_str()))
    }
}

/// Scrapes until `check` holds, at most 10 s: gauges of the table are
/// sampled once a second, and a closed connection leaves the gauges when
/// the server noticed.
async fn scrape_until(addr: SocketAddr, what: &str, check: impl Fn(&Samples) -> bool) -> Samples {
    let start = Instant::now();
    loop {
        let samples = Samples::parse(&scrape(addr).await);
        if check(&samples) {
            return samples;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}: {samples:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "metrics-test".into(),
        source: "cli/tests/commands/metrics.rs".into(),
        quorum: 1,
    }
}

/// Hands the pushes for the test's waiter to a channel.
struct Pushed(mpsc::UnboundedSender<(String, PushEvent)>);

impl PushSink for Pushed {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        let _ = self.0.send((uid.to_owned(), event));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_requests_connections_refusals_and_the_table() {
    let dir = Scratch::new("net-metrics");
    let (server, metrics) = start_with_metrics(
        &dir,
        &["--no-quarantine", "--max-waiters-per-connection", "1"],
    );

    // Before any client: every request series exists at zero, and so do
    // the gauges of the table once sampled.
    let before = scrape_until(metrics, "the first sample of the table", |s| {
        s.get("quorum_lock_server_entries", &[]) == Some(0.0)
    })
    .await;
    assert_eq!(before.requests("lock", "granted"), 0.0);
    assert_eq!(before.requests("lock_wait", "queued"), 0.0);
    assert_eq!(
        before.value("quorum_lock_server_connections_accepted_total", &[]),
        0.0
    );
    assert_eq!(
        before.get(
            "quorum_lock_server_requests_total",
            &[("op", "health"), ("result", "queued")]
        ),
        None,
        "a result a request never has has no series"
    );

    // A wrong token is refused, and counted once.
    let wrong = RemoteLocker::connect(server.addr.to_string(), remote_config("wrong-token")).await;
    assert!(
        matches!(wrong, Err(Error::Unauthorized { .. })),
        "{:?}",
        wrong.err()
    );

    let client = RemoteLocker::connect(server.addr.to_string(), remote_config(TOKEN))
        .await
        .expect("connect with the client token");
    assert!(client.lock(&args("w1", "a")).await.unwrap());
    assert!(!client.lock(&args("w2", "a")).await.unwrap());
    assert!(client.rlock(&args("r1", "b")).await.unwrap());
    assert!(client.rlock(&args("r2", "b")).await.unwrap());
    assert!(client.refresh(&args("w1", "a")).await.unwrap());

    // One wait in line on "a"; a second one breaks the connection's
    // waiters limit of 1.
    let (tx, mut pushes) = mpsc::unbounded_channel();
    let wake = Wake::new(Arc::new(Pushed(tx)), 0);
    let wait = |wake: &Wake| WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(30),
        wake: Some(wake.clone()),
    };
    let queued = client
        .lock_wait(&args("w3", "a"), LockMode::Write, &wait(&wake))
        .await;
    assert_eq!(queued.unwrap(), WaitReply::Queued);
    let over = client
        .lock_wait(&args("w4", "a"), LockMode::Write, &wait(&wake))
        .await;
    assert!(over.is_err(), "{over:?}");

    // Releasing "a" hands it to the waiter.
    assert!(client.unlock(&args("w1", "a")).await.unwrap());
    let pushed = tokio::time::timeout(Duration::from_secs(5), pushes.recv()).await;
    assert_eq!(
        pushed.expect("a push within 5 s"),
        Some(("w3".to_owned(), PushEvent::Granted))
    );
    assert!(!client.unlock(&args("w1", "a")).await.unwrap());
    assert!(client
        .fence(&args("w3", "a"), LockMode::Write, 0)
        .await
        .unwrap()
        .is_some());
    let listed = client.locks().await;
    // Listing needs the admin token.
    assert!(
        matches!(listed, Err(Error::Unauthorized { .. })),
        "{listed:?}"
    );
    let (quarantined, entries) = client.health().await.unwrap();
    assert!(!quarantined);
    // Held now: "a" by w3, "b" by r1 and r2.
    assert_eq!(entries, 3);

    let after = scrape_until(
        metrics,
        "the table's gauges and the closed connection",
        |s| {
            // Three entries were held before w1's unlock too: the sample
            // that counts w1's tombstone is the one taken after it.
            s.get("quorum_lock_server_entries", &[]) == Some(3.0)
                && s.get("quorum_lock_server_tombstones", &[]) == Some(1.0)
                && s.get("quorum_lock_server_connections", &[("state", "handshake")]) == Some(0.0)
        },
    )
    .await;
    for (op, result, count) in [
        ("lock", "granted", 1.0),
        ("lock", "refused", 1.0),
        ("lock", "error", 0.0),
        ("rlock", "granted", 2.0),
        ("refresh", "ok", 1.0),
        ("lock_wait", "queued", 1.0),
        ("lock_wait", "error", 1.0),
        ("lock_wait", "granted", 0.0),
        ("unlock", "ok", 1.0),
        ("unlock", "refused", 1.0),
        ("fence", "ok", 1.0),
        ("list", "forbidden", 1.0),
        ("list", "ok", 0.0),
        ("health", "ok", 1.0),
        ("runlock", "ok", 0.0),
        ("force_unlock", "ok", 0.0),
    ] {
        assert_eq!(
            after.requests(op, result),
            count,
            "requests of {op} with result {result}"
        );
    }
    assert_eq!(
        after.value(
            "quorum_lock_server_request_seconds_count",
            &[("op", "lock")]
        ),
        2.0
    );
    assert_eq!(
        after.value("quorum_lock_server_connections_accepted_total", &[]),
        2.0
    );
    assert_eq!(
        after.value(
            "quorum_lock_server_connections",
            &[("state", "authenticated")]
        ),
        1.0
    );
    assert_eq!(
        after.value(
            "quorum_lock_server_auth_refused_total",
            &[("reason", "token")]
        ),
        1.0
    );
    assert_eq!(
        after.value(
            "quorum_lock_server_auth_refused_total",
            &[("reason", "version")]
        ),
        0.0
    );
    assert_eq!(
        after.value(
            "quorum_lock_server_limit_refusals_total",
            &[("limit", "max_waiters_per_connection")]
        ),
        1.0
    );
    assert_eq!(
        after.value(
            "quorum_lock_server_limit_refusals_total",
            &[("limit", "max_connections")]
        ),
        0.0
    );
    assert_eq!(after.value("quorum_lock_server_resources", &[]), 2.0);
    assert!(after.value("quorum_lock_server_lock_bytes", &[]) > 0.0);
    assert_eq!(after.value("quorum_lock_server_tombstones", &[]), 1.0);
    assert!(after.value("quorum_lock_server_tombstone_bytes", &[]) > 2.0);
    assert_eq!(
        after.value("quorum_lock_server_quarantine_seconds", &[]),
        0.0
    );
    // No label carries a uid, resource name or address.
    for value in after.no_label_values() {
        assert!(
            !["w1", "w3", "a", "b", "r1"].contains(&value) && !value.contains("127.0.0.1"),
            "label value {value:?}"
        );
    }

    // Releasing everything empties the table's gauges.
    assert!(client.unlock(&args("w3", "a")).await.unwrap());
    assert!(client.runlock(&args("r1", "b")).await.unwrap());
    assert!(client.runlock(&args("r2", "b")).await.unwrap());
    let empty = scrape_until(metrics, "an empty table", |s| {
        s.get("quorum_lock_server_entries", &[]) == Some(0.0)
            && s.get("quorum_lock_server_resources", &[]) == Some(0.0)
    })
    .await;
    assert_eq!(empty.requests("runlock", "ok"), 2.0);
    assert_eq!(empty.value("quorum_lock_server_tombstones", &[]), 4.0);
    drop(client);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_server_reports_the_time_left() {
    let dir = Scratch::new("net-metrics-quarantine");
    let (_server, metrics) = start_with_metrics(&dir, &[]);
    let samples = scrape_until(metrics, "the quarantine gauge", |s| {
        s.get("quorum_lock_server_quarantine_seconds", &[])
            .is_some_and(|left| left > 0.0)
    })
    .await;
    let left = samples.value("quorum_lock_server_quarantine_seconds", &[]);
    // The quarantine equals the validity, 6 s.
    assert!(left <= 6.0, "{left}");
}

fn server_args<'a>(dir_token: &'a str, metrics: &'a str) -> Vec<&'a str> {
    vec![
        "server",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        dir_token,
        "--metrics",
        metrics,
    ]
}

fn check(finished: &Finished, code: i32, needle: &str) {
    assert_eq!(finished.code, Some(code), "{finished:?}");
    assert!(
        finished.stderr.contains(needle),
        "{needle:?} not in {finished:?}"
    );
    assert!(!finished.stderr.contains("panicked"), "{finished:?}");
}

#[test]
fn a_bad_or_taken_metrics_address_fails_with_a_clear_message() {
    let dir = Scratch::new("net-metrics-errors");
    let token = dir.token();
    let bad = cli(&dir, &server_args(&token, "localhost"), &[], LIMIT);
    check(&bad, 2, "bad --metrics address 'localhost'");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("bound").to_string();
    let failed = cli(&dir, &server_args(&token, &addr), &[], LIMIT);
    check(&failed, 1, &format!("cannot serve metrics on {addr}"));
    drop(taken);
}
