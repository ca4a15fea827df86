//! The server's limits, in one process:
//! field lengths, the frame limit before authentication, the connection
//! cap, bytes per connection and in total, quarantine re-grants, and the
//! validity announced in the handshake. Each test failed before the fix.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::loopback;
use crate::wire::{
    args_request, authenticate, authenticate_as, closed_within, frame, leader_request,
    lock_request, lock_wait_request, read_frame, read_varint, request, response,
    KIND_INVALID_ARGUMENT, OP_HEALTH, OP_LOCK, OP_RLOCK, OP_UNLOCK, REPLY_ERROR, VERSION_5,
};
use quorum_lock::net::{
    LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerStats, MAX_HELLO_FRAME,
    MAX_OWNER_LEN, MAX_SOURCE_LEN, MAX_UID_LEN,
};
use quorum_lock::{
    Dsync, Lease, LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker, Ticket, WaitArgs,
    WaitReply,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const TOKEN: &str = "client-secret";
const LIMIT: Duration = Duration::from_secs(5);

/// A server on an ephemeral loopback port; stops when dropped.
struct Node {
    addr: String,
    locker: Arc<LocalLocker>,
    stats: ServerStats,
    _stop: oneshot::Sender<()>,
}

async fn start(locker: LocalLocker, config: ServerConfig) -> Node {
    let locker = Arc::new(locker);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let stats = server.stats();
    let (bound, stop) = loopback::serve(server).await;
    Node {
        addr: bound.to_string(),
        locker,
        stats,
        _stop: stop,
    }
}

fn args(uid: &str, names: &[String]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names.to_vec().into(),
        owner: "net_limits".into(),
        source: "tests/net/limits.rs".into(),
        quorum: 1,
    }
}

async fn remote(node: &Node) -> RemoteLocker {
    RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect")
}

/// Polls `check` every 10 ms, without blocking the runtime, for at most
/// [`LIMIT`].
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let polls = tokio::time::timeout(LIMIT, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    polls
        .await
        .unwrap_or_else(|_| panic!("timed out after {LIMIT:?} waiting for {what}"));
}

/// Sends one request frame and returns the reply's text.
async fn ask(stream: &mut TcpStream, payload: &[u8]) -> String {
    stream.write_all(&frame(payload)).await.unwrap();
    let reply = tokio::time::timeout(LIMIT, read_frame(stream, 64 * 1024))
        .await
        .expect("a reply in time")
        .expect("a reply, not a closed connection");
    String::from_utf8_lossy(&reply).into_owned()
}

#[tokio::test]
async fn over_long_fields_are_refused_by_id_and_leave_nothing_behind() {
    let node = start(LocalLocker::new(), ServerConfig::new(TOKEN)).await;
    let (mut stream, _) = authenticate(&node.addr, TOKEN).await.unwrap();
    let long_uid = vec![b'u'; 2_000_000];
    let name: &[u8] = b"r";
    let cases: Vec<(u8, Vec<u8>, String)> = vec![
        (
            OP_LOCK,
            args_request(1, OP_LOCK, &long_uid, &[name], b"o", b"s"),
            "uid of 2000000 bytes".into(),
        ),
        (
            OP_UNLOCK,
            args_request(2, OP_UNLOCK, &long_uid, &[name], b"o", b"s"),
            "uid of 2000000 bytes".into(),
        ),
        (
            OP_LOCK,
            args_request(3, OP_LOCK, &[b'u'; MAX_UID_LEN + 1], &[name], b"o", b"s"),
            format!("uid of {} bytes; at most {MAX_UID_LEN}", MAX_UID_LEN + 1),
        ),
        (
            OP_LOCK,
            args_request(4, OP_LOCK, b"u", &[name], &[b'o'; MAX_OWNER_LEN + 1], b"s"),
            format!("owner of {} bytes", MAX_OWNER_LEN + 1),
        ),
        (
            OP_LOCK,
            args_request(5, OP_LOCK, b"u", &[name], b"o", &[b's'; 1_500_000]),
            format!("source of 1500000 bytes; at most {MAX_SOURCE_LEN}"),
        ),
        (
            OP_LOCK,
            args_request(6, OP_LOCK, b"u", &vec![name; 100_000], b"o", b"s"),
            "100000 resources in one lock".into(),
        ),
        (
            OP_LOCK,
            args_request(7, OP_LOCK, b"u", &[&[b'n'; 1025][..]], b"o", b"s"),
            "resource name of 1025 bytes".into(),
        ),
    ];
    for (op, payload, expected) in cases {
        let reply = ask(&mut stream, &payload).await;
        assert!(
            reply.contains(&expected),
            "op {op}: expected an error with {expected:?}, got {reply:?}"
        );
    }
    assert!(node.locker.snapshot().is_empty(), "nothing was granted");
    assert_eq!(node.stats.released_bytes(), 0, "no tombstone was kept");
    // The connection is still served.
    let health = ask(&mut stream, &request(8, OP_HEALTH)).await;
    assert_eq!(health.as_bytes()[..2], [8, 2], "Health reply: {health:?}");
    // At the limits exactly, all is well.
    let ok = args_request(
        9,
        OP_LOCK,
        &[b'u'; MAX_UID_LEN],
        &[&[b'n'; 1024][..]],
        &[b'o'; MAX_OWNER_LEN],
        &[b's'; MAX_SOURCE_LEN],
    );
    assert_eq!(ask(&mut stream, &ok).await.as_bytes(), [9, 0, 1]);
}

#[tokio::test]
async fn names_with_control_characters_are_refused_by_the_server() {
    // Sent raw, as a client that skips the library's own check would.
    let node = start(LocalLocker::new(), ServerConfig::new(TOKEN)).await;
    let (mut stream, _) = authenticate_as(&node.addr, TOKEN, VERSION_5).await.unwrap();
    let cases: [(&str, Vec<u8>); 4] = [
        ("lock", lock_request(1, OP_LOCK, "u1", &["ok", "job\n1"])),
        ("read lock", lock_request(2, OP_RLOCK, "u2", &["\u{1b}[2J"])),
        (
            "lock in line",
            lock_wait_request(
                3,
                "u3",
                &["tab\there"],
                (1, 1),
                Duration::from_secs(5),
                false,
            ),
        ),
        ("leader", leader_request(4, "u4", &["election/a\rb"], None)),
    ];
    for (what, payload) in cases {
        let reply = ask(&mut stream, &payload).await;
        assert!(
            reply.contains("must not contain control characters"),
            "{what}: {reply:?}"
        );
    }
    assert!(node.locker.snapshot().is_empty(), "nothing was granted");
    // The connection is still served.
    let health = ask(&mut stream, &request(5, OP_HEALTH)).await;
    assert_eq!(health.as_bytes()[..2], [5, 2], "Health reply: {health:?}");
}

#[tokio::test]
async fn owners_sources_and_uids_with_control_characters_are_refused_by_the_server() {
    // Sent raw, as an older or hand-made client would, which the library's
    // own checks do not stop.
    let node = start(LocalLocker::new(), ServerConfig::new(TOKEN)).await;
    let (mut stream, _) = authenticate_as(&node.addr, TOKEN, VERSION_5).await.unwrap();
    let name: &[u8] = b"r";
    let forged = "bob\u{1b}]0;pwned\u{7}\r\nr  write  mallory  0ms\u{7f}".as_bytes();
    let cases: [(&str, Vec<u8>); 5] = [
        (
            "owner",
            args_request(1, OP_LOCK, b"u1", &[name], forged, b"s"),
        ),
        (
            "source",
            args_request(2, OP_RLOCK, b"u2", &[name], b"o", forged),
        ),
        ("uid", args_request(3, OP_LOCK, forged, &[name], b"o", b"s")),
        (
            "owner",
            args_request(4, OP_UNLOCK, b"u1", &[name], forged, b"s"),
        ),
        (
            "owner",
            args_request(
                5,
                OP_LOCK,
                b"u5",
                &[name],
                "rtl\u{202e}txt".as_bytes(),
                b"s",
            ),
        ),
    ];
    for (field, payload) in cases {
        stream.write_all(&frame(&payload)).await.unwrap();
        let reply = tokio::time::timeout(LIMIT, read_frame(&mut stream, 64 * 1024))
            .await
            .expect("a reply in time")
            .expect("a reply, not a closed connection");
        // Response { id, Error { kind: InvalidArgument, message } }.
        let (_, rest) = response(&reply);
        assert_eq!(
            rest[..2],
            [REPLY_ERROR, KIND_INVALID_ARGUMENT],
            "{field}: {reply:?}"
        );
        let (len, text) = read_varint(&rest[2..]).expect("a message length");
        let message = std::str::from_utf8(&text[..len as usize]).expect("UTF-8");
        assert!(
            message.contains(&format!("the {field} ")) && message.contains("control characters"),
            "{field}: {message}"
        );
        assert!(
            !message.contains(['\n', '\r', '\u{1b}', '\u{7}', '\u{7f}', '\u{202e}']),
            "the reply repeats the raw text: {message:?}"
        );
    }
    assert!(node.locker.snapshot().is_empty(), "nothing was granted");
    assert_eq!(node.stats.released_bytes(), 0, "no tombstone was kept");
    // The connection is still served.
    let health = ask(&mut stream, &request(6, OP_HEALTH)).await;
    assert_eq!(health.as_bytes()[..2], [6, 2], "Health reply: {health:?}");
}

#[tokio::test]
async fn before_authentication_only_small_frames_are_read() {
    let mut config = ServerConfig::new(TOKEN);
    // Long, so that only the frame limit can close the connection in time.
    config.handshake_timeout = Duration::from_secs(60);
    let node = start(LocalLocker::new(), config).await;

    let mut stream = TcpStream::connect(&node.addr).await.unwrap();
    let claimed = (MAX_HELLO_FRAME as u32 + 1).to_be_bytes();
    stream.write_all(&claimed).await.unwrap();
    stream.write_all(&[0; 1024]).await.unwrap();
    let reply = closed_within(&mut stream, LIMIT)
        .await
        .expect("an oversized first frame closes the connection at once");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.contains(&format!("at most {MAX_HELLO_FRAME} bytes")),
        "{reply:?}"
    );

    // The full frame size is available once authenticated.
    let (mut stream, _) = authenticate(&node.addr, TOKEN).await.unwrap();
    let names: Vec<Vec<u8>> = (0..1000)
        .map(|i| format!("{i:01024}").into_bytes())
        .collect();
    let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let big = args_request(1, OP_LOCK, b"big", &names, b"o", b"s");
    assert!(big.len() > 1_000_000);
    assert_eq!(ask(&mut stream, &big).await.as_bytes(), [1, 0, 1]);
}

#[tokio::test]
async fn idle_unauthenticated_connections_cannot_keep_clients_out() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = 4;
    // No slots beyond the clients': four in all.
    config.admin_reserve = 0;
    config.handshake_timeout = Duration::from_secs(60);
    let node = start(LocalLocker::new(), config).await;
    let first = remote(&node).await;
    let name = vec!["held".to_string()];
    assert!(first.lock(&args("u1", &name)).await.unwrap());

    // 23 peers that never authenticate, more than the cap: 3 take the free
    // slots, and the others wait at the door for their first bytes, which
    // never come (or take the place of the oldest, once it had its grace to
    // speak), so 20 are closed and at most 3 stay open.
    let mut idle = Vec::new();
    for _ in 0..23 {
        idle.push(TcpStream::connect(&node.addr).await.unwrap());
    }
    let closed = futures::future::join_all(
        idle.iter_mut()
            .map(|stream| async move { closed_within(stream, LIMIT).await.is_ok() }),
    )
    .await;
    let closed = closed.iter().filter(|c| **c).count();
    assert_eq!(closed, 20, "of 23 silent connections, {closed} were closed");
    eventually("the cap is respected", || node.stats.connections() == 4).await;
    // The authenticated client was not disturbed, and a new one gets in.
    assert!(first.refresh(&args("u1", &name)).await.unwrap());
    let second = remote(&node).await;
    assert!(second.is_online());
    assert!(second
        .lock(&args("u2", &["other".to_string()]))
        .await
        .unwrap());

    // When every slot is authenticated, a new connection is closed at once.
    let (_third, _) = authenticate(&node.addr, TOKEN).await.unwrap();
    let (_fourth, _) = authenticate(&node.addr, TOKEN).await.unwrap();
    eventually("four authenticated", || node.stats.connections() == 4).await;
    let mut fifth = TcpStream::connect(&node.addr).await.unwrap();
    closed_within(&mut fifth, LIMIT)
        .await
        .expect("a connection beyond four authenticated ones is closed");
    assert!(second
        .refresh(&args("u2", &["other".to_string()]))
        .await
        .unwrap());
}

#[tokio::test]
async fn the_bytes_of_one_connection_and_of_all_are_limited() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 10 << 20;
    config.max_lock_bytes = 14 << 20;
    let node = start(LocalLocker::new(), config).await;
    // 1000 names of 1 KiB: about 3 MB charged per lock (each name's bytes
    // twice, as in any request of several names, with the table's
    // worst-case cost per name).
    let big_lock =
        |n: usize| -> Vec<String> { (0..1000).map(|i| format!("{n}-{i:01020}")).collect() };
    let first = remote(&node).await;
    for n in 0..3 {
        assert!(first
            .lock(&args(&format!("a{n}"), &big_lock(n)))
            .await
            .unwrap());
    }
    let err = first
        .lock(&args("a3", &big_lock(3)))
        .await
        .expect_err("over the connection's bytes");
    assert!(err.to_string().contains("over its limit"), "{err}");
    assert!(node.stats.lock_bytes() <= 10 << 20);
    // Unlocking frees the charge.
    assert!(first.unlock(&args("a0", &big_lock(0))).await.unwrap());
    assert!(first.lock(&args("a3", &big_lock(3))).await.unwrap());

    // Reconnecting does not escape the total: the locks stay charged.
    let mut refused = None;
    for n in 10..20 {
        let client = remote(&node).await;
        if let Err(err) = client.lock(&args(&format!("b{n}"), &big_lock(n))).await {
            refused = Some(err);
            break;
        }
    }
    let err = refused.expect("the total limit refused a lock");
    assert!(err.to_string().contains("lock table is full"), "{err}");
    assert!(node.stats.lock_bytes() <= 14 << 20);
    let entries = node.locker.snapshot().len();
    assert!(entries <= 5_000, "{entries} entries");
}

#[tokio::test]
async fn a_quarantine_regrant_by_refresh_counts_against_the_connection() {
    let locker = LocalLocker::with_config(
        "restarted",
        LockerConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
        },
    );
    locker.restart();
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 3;
    let node = start(locker, config).await;
    let client = remote(&node).await;
    // Each re-grant answers the quarantine (it must not count) but creates
    // the entries, and is charged for them.
    let quarantined = |r: Result<bool, quorum_lock::Error>| matches!(&r, Err(e) if e.to_string().contains("refusing new grants"));
    for i in 0..3 {
        let held = args(&format!("fresh-{i}"), &[format!("r{i}")]);
        let answer = client.refresh_mode(&held, LockMode::Write).await;
        assert!(quarantined(answer.clone()), "{answer:?}");
    }
    assert_eq!(node.locker.snapshot().len(), 3);
    let err = client
        .refresh_mode(&args("fresh-3", &["r3".to_string()]), LockMode::Write)
        .await
        .expect_err("a fourth re-grant is over the limit");
    assert!(err.to_string().contains("already holds 3 locks"), "{err}");
    assert_eq!(node.locker.snapshot().len(), 3);
    // Refreshing what it holds is still fine (and still not counted).
    let answer = client
        .refresh_mode(&args("fresh-0", &["r0".to_string()]), LockMode::Write)
        .await;
    assert!(quarantined(answer.clone()), "{answer:?}");
    assert_eq!(node.locker.snapshot().len(), 3);
}

#[tokio::test]
async fn the_client_learns_the_servers_validity_in_the_handshake() {
    let locker = LocalLocker::with_config(
        "short",
        LockerConfig {
            validity: Duration::from_secs(7),
            ..LockerConfig::default()
        },
    );
    let node = start(locker, ServerConfig::new(TOKEN)).await;
    let client = remote(&node).await;
    assert_eq!(client.validity(), Some(Duration::from_secs(7)));

    // A coordinator refuses a lease the server would not honour.
    let locker: Arc<dyn NetLocker> = Arc::new(client);
    let too_long = Lease {
        validity: Duration::from_secs(8),
        refresh_interval: Duration::from_secs(1),
        safety_margin: Duration::from_secs(1),
    };
    let Err(err) = Dsync::builder(vec![locker.clone()]).lease(too_long).build() else {
        panic!("a lease longer than the server's validity was accepted");
    };
    assert!(
        err.to_string().contains("must not exceed the validity"),
        "{err}"
    );
    let fitting = Lease {
        validity: Duration::from_secs(7),
        ..too_long
    };
    let ds = Dsync::builder(vec![locker])
        .lease(fitting)
        .build()
        .expect("a lease within the server's validity");
    let guard = ds.rw_mutex(["fits"]).unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();

    // Before any handshake succeeded, nothing is claimed.
    let nowhere = {
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let offline = RemoteLocker::connect(nowhere, RemoteConfig::new(TOKEN))
        .await
        .unwrap();
    assert_eq!(offline.validity(), None);
}

/// A waiter that asks again with the same ticket under a new uid for other
/// names (a client may, as the coordinator does for the same names) is
/// one waiter: the server keeps the places of its newest request only, on
/// every name, and charges exactly those. Requests that share a name
/// alternate with requests that share none; every one keeps its place as
/// a reservation (no push), since a name of it is held.
#[tokio::test]
async fn a_waiter_asking_under_a_new_uid_for_other_names_keeps_only_its_newest_places() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = 1 << 20;
    let node = start(LocalLocker::new(), config).await;
    let client = remote(&node).await;
    for held in ["held-0", "held-1"] {
        let holder = args(&format!("holder-{held}"), &[held.to_string()]);
        assert!(client.lock(&holder).await.unwrap());
    }
    let holders = node.stats.lock_bytes();
    let wait = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(60),
        wake: None,
    };
    let request = |step: usize| {
        // Steps 2k and 2k+1 share their held name; 2k+1 and 2k+2 share none.
        let mut names: Vec<String> = (0..200).map(|i| format!("s{step:03}-{i:04}")).collect();
        names.push(format!("held-{}", (step / 2) % 2));
        args(&format!("try-{step:03}"), &names)
    };
    let mut charged = None;
    for step in 0..40 {
        let reply = client
            .lock_wait(&request(step), LockMode::Write, &wait)
            .await;
        assert_eq!(reply.unwrap(), WaitReply::Refused, "step {step}");
        assert_eq!(
            node.locker.waiting(),
            201,
            "step {step}: the places of the newest request only"
        );
        let now = node.stats.lock_bytes() - holders;
        assert_eq!(
            *charged.get_or_insert(now),
            now,
            "step {step}: one request charged"
        );
    }
    // Nobody stands in line on an earlier request's names any more.
    let other = remote(&node).await;
    for step in [0, 1, 38] {
        let name = format!("s{step:03}-0000");
        assert!(
            other.lock(&args("plain", &[name])).await.unwrap(),
            "a name of step {step} is free"
        );
    }
    let newest = "s039-0000".to_string();
    assert!(!other.lock(&args("plain", &[newest])).await.unwrap());
}
