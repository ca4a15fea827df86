//! Who gets a connection slot: clients with the client token cannot take
//! the slots kept for the admin token, one address cannot take more than
//! its share, and a client connection that stays silent while holding
//! nothing gives its slot back.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{start, TOKEN};
use crate::wire::{
    authenticate, closed_within, frame, lock_request, read_frame, read_varint, request, OP_HEALTH,
    OP_LOCK,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Error, LockArgs, NetLocker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const ADMIN: &str = "admin-secret";
const LIMIT: Duration = Duration::from_secs(5);

/// A server on an ephemeral loopback port; stops when dropped.
fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_string()].into(),
        owner: "connection_slots".into(),
        source: "tests/net/connection_slots.rs".into(),
        quorum: 1,
    }
}

/// Polls `check` every 10 ms for at most [`LIMIT`].
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

/// The reason of a `Welcome::Rejected`, or `None` for an `Accepted`.
fn rejection(welcome: &[u8]) -> Option<String> {
    match welcome.first() {
        Some(0) => None,
        // Variant 1, then the reason as a length-prefixed string.
        Some(1) => {
            let (_, reason) = read_varint(&welcome[1..]).expect("a reason");
            Some(String::from_utf8_lossy(reason).into_owned())
        }
        other => panic!("not a Welcome: {other:?}"),
    }
}

/// Sends one request frame and waits for one reply frame.
async fn answered(stream: &mut TcpStream, payload: &[u8]) -> bool {
    if stream.write_all(&frame(payload)).await.is_err() {
        return false;
    }
    matches!(
        tokio::time::timeout(LIMIT, read_frame(stream, 64 * 1024)).await,
        Ok(Ok(_))
    )
}

#[tokio::test]
async fn clients_filling_every_slot_leave_room_for_the_admin_token() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_connections = 4;
    let node = start(config).await;

    // Two clients hold locks, two sit idle: every client slot is taken.
    let mut holders = Vec::new();
    for i in 0..2 {
        let holder = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
            .await
            .expect("connect");
        assert!(holder
            .lock(&args(&format!("u{i}"), &format!("held-{i}")))
            .await
            .unwrap());
        holders.push(holder);
    }
    let mut idle = Vec::new();
    for _ in 0..2 {
        let (stream, welcome) = authenticate(&node.addr, TOKEN)
            .await
            .expect("authenticates");
        assert_eq!(rejection(&welcome), None);
        idle.push(stream);
    }
    eventually("four clients", || node.stats.connections() == 4).await;

    // A fifth client is refused in its handshake, saying why, and is not
    // told its token is wrong: it keeps trying in the background.
    let fifth = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .expect("a busy server is no reason to give up");
    match fifth.connect_error() {
        Some(Error::LockerUnavailable { reason, .. }) => assert!(
            reason.contains("all 4 client connections are in use"),
            "{reason}"
        ),
        other => panic!("expected the refusal's reason, got {other:?}"),
    }

    // The admin still gets in, lists the locks and asks for the status.
    let admin = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(ADMIN))
        .await
        .expect("connect as admin");
    assert!(admin.is_online(), "{:?}", admin.connect_error());
    let locks = admin.locks().await.expect("the admin lists the locks");
    assert_eq!(locks.len(), 2);
    let status = admin.status().await.expect("the admin asks for the status");
    assert_eq!(status.entries, 2);

    // The clients were not disturbed.
    assert!(holders[0].refresh(&args("u0", "held-0")).await.unwrap());
    for stream in &mut idle {
        assert!(answered(stream, &request(9, OP_HEALTH)).await);
    }
}

#[tokio::test]
async fn one_address_gets_at_most_its_share_of_client_connections() {
    let mut config = ServerConfig::new(TOKEN).admin_token(ADMIN);
    config.max_connections_per_address = 3;
    let node = start(config).await;
    let mut kept = Vec::new();
    for _ in 0..3 {
        let (stream, welcome) = authenticate(&node.addr, TOKEN)
            .await
            .expect("authenticates");
        assert_eq!(rejection(&welcome), None);
        kept.push(stream);
    }
    let (mut fourth, welcome) = authenticate(&node.addr, TOKEN)
        .await
        .expect("answered with a reason");
    let reason = rejection(&welcome).expect("the fourth connection is rejected");
    assert!(
        reason.contains("3 connections from 127.0.0.1")
            && reason.contains("--max-connections-per-address"),
        "{reason}"
    );
    closed_within(&mut fourth, LIMIT)
        .await
        .expect("the rejected connection is closed");
    // The admin token is not counted against the address.
    let (_admin, welcome) = authenticate(&node.addr, ADMIN)
        .await
        .expect("authenticates");
    assert_eq!(rejection(&welcome), None);
    // A slot given back is free for the address again.
    drop(kept.pop());
    let again = tokio::time::timeout(LIMIT, async {
        loop {
            let (stream, welcome) = authenticate(&node.addr, TOKEN).await.expect("answered");
            if rejection(&welcome).is_none() {
                return stream;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    again.await.expect("a freed slot is reused");
}

#[tokio::test]
async fn a_silent_client_holding_nothing_is_closed_and_one_holding_a_lock_is_not() {
    let idle_timeout = Duration::from_millis(300);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(idle_timeout);
    let node = start(config).await;

    let (mut holding, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    assert!(answered(&mut holding, &lock_request(1, OP_LOCK, "held", &["held"])).await);
    let (mut silent, _) = authenticate(&node.addr, TOKEN)
        .await
        .expect("authenticates");
    let started = tokio::time::Instant::now();
    closed_within(&mut silent, LIMIT)
        .await
        .expect("the silent connection holding nothing is closed");
    assert!(
        started.elapsed() >= idle_timeout - Duration::from_millis(50),
        "closed after {:?}, before the idle timeout",
        started.elapsed()
    );

    // Three idle timeouts later, the one holding a lock is still served.
    tokio::time::sleep(3 * idle_timeout).await;
    assert!(
        answered(&mut holding, &request(2, OP_HEALTH)).await,
        "the connection holding a lock was closed"
    );
}

#[tokio::test]
async fn a_remote_locker_closed_for_idleness_reconnects_with_its_next_call() {
    let idle_timeout = Duration::from_millis(200);
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(idle_timeout);
    let node = start(config).await;
    let locker = RemoteLocker::connect(node.addr.clone(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect");
    locker.health().await.expect("healthy");
    eventually("the idle connection closed", || {
        node.stats.connections() == 0
    })
    .await;
    // It does not reconnect by itself, or the slot would never be free.
    tokio::time::sleep(3 * idle_timeout).await;
    assert_eq!(
        node.stats.connections(),
        0,
        "the locker reconnected while idle"
    );
    assert!(locker.is_online(), "closed for idleness is not offline");

    // The next call opens a connection and goes through, as do later ones.
    assert!(locker
        .lock(&args("u1", "after-idle"))
        .await
        .expect("the next call reconnects"));
    assert_eq!(node.stats.connections(), 1);
    tokio::time::sleep(3 * idle_timeout).await;
    assert!(
        locker.refresh(&args("u1", "after-idle")).await.unwrap(),
        "a held lock keeps its connection"
    );
    assert!(locker.unlock(&args("u1", "after-idle")).await.unwrap());
}
