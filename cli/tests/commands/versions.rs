//! Protocol versions 2 to 6 side by side (PROTOCOL.md, "Versioning"): a
//! version-6 server serves version-2 to -5 clients, a newest
//! client falls back to version 2 against a version-2 server and then waits
//! by polling and has no fencing tokens, falls back to version 3 against a
//! version-3 server and then asks `Health` for its status, and versions
//! neither side speaks are refused at connect time with a reason.

use std::sync::Arc;
use std::time::Duration;

use crate::support::old_server::OldServer;
use crate::support::wire::{
    authenticate_as, frame, lock_request, lock_wait_request, read_frame, request, response,
    OP_FENCE, OP_HEALTH, OP_LOCK, OP_RLOCK, OP_STATUS, OP_UNLOCK, REPLY_BOOL, REPLY_ERROR,
    REPLY_HEALTH, REPLY_STATUS, REPLY_WAIT, VERSION, VERSION_3, VERSION_4, VERSION_5, VERSION_6,
};
use crate::support::{remote_config, Scratch, Server, TOKEN};
use quorum_lock::net::RemoteLocker;
use quorum_lock::{Dsync, Error, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_string()].into(),
        owner: "net_versions".into(),
        source: "cli/tests/commands/versions.rs".into(),
        quorum: 1,
    }
}

fn wait_args() -> WaitArgs {
    WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(5),
        wake: None,
    }
}

async fn roundtrip(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("send");
    tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 1 << 20))
        .await
        .expect("a reply in time")
        .expect("a reply")
}

/// The Welcome's version: `[0, version, ...]` when accepted.
fn welcome_version(welcome: &[u8]) -> u8 {
    assert_eq!(welcome[0], 0, "rejected: {welcome:?}");
    welcome[1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_server_serves_version_2_to_6_hellos_and_refuses_others() {
    let dir = Scratch::new("net-versions-server");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr.to_string();

    // A version-2 client, byte for byte as before version 3.
    let (mut old, welcome) = authenticate_as(&addr, TOKEN, VERSION).await.unwrap();
    assert_eq!(welcome_version(&welcome), 2);
    let reply = roundtrip(&mut old, &lock_request(1, OP_LOCK, "v2-uid", &["v2-name"])).await;
    assert_eq!(reply, [1, REPLY_BOOL, 1], "granted");
    let reply = roundtrip(&mut old, &request(2, OP_HEALTH)).await;
    assert_eq!(&reply[..2], &[2, REPLY_HEALTH]);
    // A version-3 request on a version-2 connection is refused by id, and
    // the connection stays.
    let wait = lock_wait_request(
        3,
        "v2-wait",
        &["other"],
        (1, 1),
        Duration::from_secs(1),
        true,
    );
    let reply = roundtrip(&mut old, &wait).await;
    let (id, rest) = response(&reply);
    assert_eq!((id, rest[0]), (3, REPLY_ERROR));
    assert!(
        String::from_utf8_lossy(rest).contains("needs protocol version 3"),
        "{reply:?}"
    );
    let reply = roundtrip(
        &mut old,
        &lock_request(4, OP_UNLOCK, "v2-uid", &["v2-name"]),
    )
    .await;
    assert_eq!(reply, [4, REPLY_BOOL, 1], "released");

    // A version-3 client.
    let (mut new, welcome) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    assert_eq!(welcome_version(&welcome), 3);
    let wait = lock_wait_request(
        1,
        "v3-uid",
        &["v3-name"],
        (1, 1),
        Duration::from_secs(1),
        true,
    );
    let reply = roundtrip(&mut new, &wait).await;
    assert_eq!(
        reply,
        [1, REPLY_WAIT, 0],
        "granted at once: nobody holds it"
    );
    // A place_ttl of zero is refused.
    let zero = lock_wait_request(2, "v3-zero", &["v3-zero"], (1, 1), Duration::ZERO, true);
    let reply = roundtrip(&mut new, &zero).await;
    let (_, rest) = response(&reply);
    assert_eq!(rest[0], REPLY_ERROR);
    assert!(
        String::from_utf8_lossy(rest).contains("place_ttl of zero"),
        "{reply:?}"
    );
    // A version-4 request on a version-3 connection is refused by id, and
    // the connection stays.
    let reply = roundtrip(&mut new, &request(3, OP_STATUS)).await;
    let (id, rest) = response(&reply);
    assert_eq!((id, rest[0]), (3, REPLY_ERROR));
    assert!(
        String::from_utf8_lossy(rest).contains("needs protocol version 4"),
        "{reply:?}"
    );
    let reply = roundtrip(&mut new, &request(4, OP_HEALTH)).await;
    assert_eq!(reply, [4, REPLY_HEALTH, 0, 1], "not quarantined, one entry");

    // A version-4 client: `Status` says there is no quarantine (`None`)
    // and one entry, v3-uid's.
    let (mut newest, welcome) = authenticate_as(&addr, TOKEN, VERSION_4).await.unwrap();
    assert_eq!(welcome_version(&welcome), 4);
    let reply = roundtrip(&mut newest, &request(1, OP_STATUS)).await;
    assert_eq!(reply, [1, REPLY_STATUS, 0, 1]);

    // Version 5 (election), and version 6 (listings in pages), the newest
    // it speaks.
    let (_, welcome) = authenticate_as(&addr, TOKEN, VERSION_5).await.unwrap();
    assert_eq!(welcome_version(&welcome), 5);
    let (_, welcome) = authenticate_as(&addr, TOKEN, VERSION_6).await.unwrap();
    assert_eq!(welcome_version(&welcome), 6);

    // Versions it does not speak are refused with the ones it does.
    for version in [1, 7, 99] {
        let (_, welcome) = authenticate_as(&addr, TOKEN, version).await.unwrap();
        assert_eq!(welcome[0], 1, "version {version} was accepted");
        let reason = String::from_utf8_lossy(&welcome);
        assert!(
            reason.contains(&format!(
                "protocol version {version} is not supported; this server speaks 2, 3, 4, 5 and 6"
            )),
            "{reason}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_client_falls_back_to_version_2_against_an_old_server() {
    let old = OldServer::start(TOKEN).await;
    let locker = RemoteLocker::connect(old.addr.to_string(), remote_config(TOKEN))
        .await
        .expect("connects after falling back");
    assert_eq!(locker.protocol_version(), Some(2));
    assert!(locker.is_online());
    assert_eq!(old.seen().hellos, [6, 2], "offered 6, then 2");

    // Waiting falls back to a plain lock, which the coordinator repeats.
    let a = args("fallback-uid", "fallback");
    let reply = locker.lock_wait(&a, LockMode::Write, &wait_args()).await;
    assert_eq!(reply, Ok(WaitReply::Granted));
    let reply = locker.lock_wait(&a, LockMode::Read, &wait_args()).await;
    assert_eq!(reply, Ok(WaitReply::Granted));
    // No fencing tokens from a version-2 server.
    match locker.fence(&a, LockMode::Write, 0).await {
        Err(Error::Unsupported { what, .. }) => assert_eq!(what, "fencing tokens"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(locker.unlock(&a).await.unwrap());
    // Its status comes from `Health`, without the time a quarantine has left.
    let health = locker.status().await.expect("a status from Health");
    assert_eq!(
        (health.quarantined, health.quarantine_left, health.entries),
        (false, None, 0)
    );
    // Nothing of version 3 or 4 ever reached it, and the connection stayed up.
    assert_eq!(old.seen().ops, [OP_LOCK, OP_RLOCK, OP_UNLOCK, OP_HEALTH]);
    assert!(!old.seen().ops.contains(&OP_FENCE));
    assert!(locker.is_online());

    // A coordinator over old servers locks as before.
    let mut lockers: Vec<Arc<dyn NetLocker>> = vec![Arc::new(locker)];
    let mut others = Vec::new();
    for _ in 0..2 {
        let server = OldServer::start(TOKEN).await;
        let locker = RemoteLocker::connect(server.addr.to_string(), remote_config(TOKEN))
            .await
            .unwrap();
        lockers.push(Arc::new(locker));
        others.push(server);
    }
    let ds = Dsync::builder(lockers)
        .lease(crate::support::lease())
        .build()
        .unwrap();
    let guard = ds
        .rw_mutex(["over-old-servers"])
        .unwrap()
        .lock_timeout(Duration::from_secs(5))
        .await
        .expect("locks over version-2 servers");
    guard.unlock().await.unwrap();

    // A wrong token is still reported as such after the fallback.
    match RemoteLocker::connect(old.addr.to_string(), remote_config("wrong")).await {
        Err(Error::Unauthorized { reason, .. }) => assert_eq!(reason, "invalid token"),
        Err(other) => panic!("expected Unauthorized, got {other}"),
        Ok(_) => panic!("a wrong token was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_pinned_to_version_2_is_served_as_one() {
    let dir = Scratch::new("net-versions-pinned");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let mut config = remote_config(TOKEN);
    config.protocol_version = 2;
    let old = RemoteLocker::connect(server.addr.to_string(), config)
        .await
        .unwrap();
    assert_eq!(old.protocol_version(), Some(2));
    let a = args("pinned-uid", "pinned");
    assert_eq!(
        old.lock_wait(&a, LockMode::Write, &wait_args()).await,
        Ok(WaitReply::Granted)
    );
    assert!(matches!(
        old.fence(&a, LockMode::Write, 0).await,
        Err(Error::Unsupported { .. })
    ));
    assert!(old.unlock(&a).await.unwrap());

    let new = RemoteLocker::connect(server.addr.to_string(), remote_config(TOKEN))
        .await
        .unwrap();
    assert_eq!(new.protocol_version(), Some(6));

    // A version this client does not speak is a usage error.
    let mut config = remote_config(TOKEN);
    config.protocol_version = 1;
    match RemoteLocker::connect(server.addr.to_string(), config).await {
        Err(Error::InvalidArgument(reason)) => assert!(reason.contains("protocol version 1")),
        Err(other) => panic!("expected InvalidArgument, got {other}"),
        Ok(_) => panic!("version 1 was offered"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_halfway_through_an_upgrade_locks_and_fences() {
    let dir = Scratch::new("net-versions-mixed");
    let new: Vec<Server> = (0..2)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let old = OldServer::start(TOKEN).await;
    let mut addrs: Vec<String> = new.iter().map(|s| s.addr.to_string()).collect();
    addrs.push(old.addr.to_string());
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for addr in &addrs {
        lockers.push(Arc::new(
            RemoteLocker::connect(addr.clone(), remote_config(TOKEN))
                .await
                .unwrap(),
        ));
    }
    let ds = Dsync::builder(lockers)
        .lease(crate::support::lease())
        .build()
        .unwrap();
    let mutex = ds.rw_mutex(["rolling"]).unwrap();
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let guard = mutex
            .lock_timeout(Duration::from_secs(5))
            .await
            .expect("locks with two new servers and one old");
        // The two new servers are a quorum of three: they issue the token,
        // once both hold the lock (a quorum can be the old server and one
        // new one, the other new one's grant still on its way: a draw then
        // finds a token on one new server only).
        for _ in 0..500 {
            if guard.granted_by() == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(guard.granted_by(), 3, "every server grants a free lock");
        tokens.push(
            guard
                .fencing_token()
                .await
                .expect("a token from the new servers"),
        );
        guard.unlock().await.unwrap();
    }
    assert!(tokens[0] < tokens[1], "{tokens:?}");
    // The old server saw only version-2 requests.
    assert!(
        old.seen().ops.iter().all(|op| *op <= OP_HEALTH),
        "{:?}",
        old.seen()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_client_falls_back_to_version_3_and_asks_health() {
    let old = OldServer::start_speaking(TOKEN, 3).await;
    let locker = RemoteLocker::connect(old.addr.to_string(), remote_config(TOKEN))
        .await
        .expect("connects after falling back");
    assert_eq!(locker.protocol_version(), Some(3));
    assert_eq!(old.seen().hellos, [6, 3], "offered 6, then 3");
    let health = locker.status().await.expect("a status from Health");
    assert_eq!(
        (health.quarantined, health.quarantine_left, health.entries),
        (false, None, 0)
    );
    // `Status` never reached it: it would have closed the connection.
    assert_eq!(old.seen().ops, [OP_HEALTH]);
    assert!(locker.is_online());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_version_4_and_later_tell_how_long_a_quarantine_has_left() {
    let dir = Scratch::new("net-versions-quarantine");
    // Started without --no-quarantine: it refuses grants for its validity.
    let server = Server::start_with_validity(&dir, "60s", &[]);
    let addr = server.addr.to_string();

    let newest = RemoteLocker::connect(addr.clone(), remote_config(TOKEN))
        .await
        .unwrap();
    assert_eq!(newest.protocol_version(), Some(6));
    let health = newest.status().await.expect("a status");
    assert!(health.quarantined, "{health:?}");
    let left = health.quarantine_left.expect("the time left");
    // Generous: the server started less than a minute ago, and the test
    // does not hang for most of it.
    assert!(
        left > Duration::ZERO && left <= Duration::from_secs(60),
        "{left:?}"
    );
    assert_eq!(health.entries, 0);

    for pinned in [3, 2] {
        let mut config = remote_config(TOKEN);
        config.protocol_version = pinned;
        let older = RemoteLocker::connect(addr.clone(), config).await.unwrap();
        assert_eq!(older.protocol_version(), Some(pinned));
        let health = older.status().await.expect("a status from Health");
        assert!(health.quarantined, "version {pinned}: {health:?}");
        assert_eq!(health.quarantine_left, None, "version {pinned}");
        assert_eq!(older.health().await, Ok((true, 0)));
    }
}
