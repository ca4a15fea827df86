//! What a `RedisLocker` does about the Redis server behind it: the
//! quarantine after the server starts or restarts empty, the refusal of a
//! server that may evict keys, and credentials and TLS that never show up
//! in an error.
//!
//! Each test starts its own `redis-server` processes on free loopback
//! ports and stops them by PID; see `redis_support` for how a missing
//! `redis-server` is handled.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{LockArgs, LockMode, NetLocker};

use crate::redis_support::{
    is_quarantine, locker_with, raw, wait_out_quarantine, wait_out_quarantine_keeping, RedisServer,
};

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/node.rs".into(),
        quorum: 1,
    }
}

fn config(validity: Duration, quarantine: Duration) -> RedisConfig {
    RedisConfig {
        validity,
        quarantine,
        ..RedisConfig::default()
    }
}

/// Whether the node lists an entry of `uid`.
async fn holds(redis: &Arc<dyn NetLocker>, uid: &str) -> bool {
    redis
        .locks()
        .await
        .expect("a node lists its entries")
        .iter()
        .any(|e| e.uid == uid)
}

#[tokio::test]
async fn a_fresh_server_refuses_new_grants_but_lets_holders_refresh_back() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // Long enough that a busy machine cannot use it up between the
    // server's start and the first call.
    let quarantine = Duration::from_secs(4);
    let redis = locker_with(&server, config(Duration::from_secs(10), quarantine)).await;

    let err = redis.lock(&args("writer", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let err = redis.rlock(&args("reader", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    // A holder that names its mode gets its entry back, but no answer
    // counts during the quarantine (rule Q of the restart design): the refresh, a
    // lock or a waiting lock by the holder, and a fencing token all answer
    // the quarantine. A plain refresh of an unknown uid creates nothing.
    let err = redis
        .refresh_mode(&args("holder", "q"), LockMode::Write)
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    assert!(
        holds(&redis, "holder").await,
        "the entry was not re-created"
    );
    let err = redis.refresh(&args("holder", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let err = redis.lock(&args("holder", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let wait = quorum_lock::WaitArgs {
        ticket: quorum_lock::Ticket::now(),
        place_ttl: Duration::from_secs(3),
        wake: None,
    };
    let err = redis
        .lock_wait(&args("holder", "q"), LockMode::Write, &wait)
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let err = redis
        .fence(&args("holder", "q"), LockMode::Write, 0)
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let err = redis.refresh(&args("stranger", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    assert!(!holds(&redis, "stranger").await);

    wait_out_quarantine_keeping(&redis, Some(("holder", "q"))).await;
    assert!(redis.refresh(&args("holder", "q")).await.unwrap());
    assert!(redis
        .fence(&args("holder", "q"), LockMode::Write, 0)
        .await
        .unwrap()
        .is_some());
    assert!(
        !redis.lock(&args("writer", "q")).await.unwrap(),
        "the entry re-created during the quarantine was not kept"
    );
    assert!(redis.unlock(&args("holder", "q")).await.unwrap());
    assert!(redis.lock(&args("writer", "q")).await.unwrap());
}

#[tokio::test]
async fn quarantine_left_says_how_long_grants_are_refused() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // A quarantine shorter than the validity counts as the validity.
    let long = RedisLocker::connect(
        &server.url(),
        config(Duration::from_secs(30), Duration::from_secs(4)),
    )
    .await
    .expect("connect");
    let left = long.quarantine_left().await.expect("an answer");
    // Counted from the start rounded up to a second: at most 31 s.
    assert!(
        left.is_some_and(|l| l > Duration::from_secs(20) && l <= Duration::from_secs(31)),
        "{left:?}"
    );
    let err = long.lock(&args("w", "q")).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let none = RedisLocker::connect(
        &server.url(),
        config(Duration::from_secs(30), Duration::ZERO),
    )
    .await
    .expect("connect");
    assert_eq!(none.quarantine_left().await.expect("an answer"), None);

    // It ends when the scripts start granting: the end is the same.
    let short = RedisLocker::connect(
        &server.url(),
        config(Duration::from_secs(2), Duration::from_secs(2)),
    )
    .await
    .expect("connect");
    let give_up = Instant::now() + Duration::from_secs(10);
    while let Some(left) = short.quarantine_left().await.expect("an answer") {
        assert!(left <= Duration::from_secs(3), "{left:?}");
        assert!(Instant::now() < give_up, "still {left:?} left");
        let err = short.lock(&args("w", "q")).await;
        // The server's clock may have passed the end between the calls.
        if let Err(err) = err {
            assert!(is_quarantine(&err), "{err}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(short.lock(&args("after", "q2")).await.unwrap());
}

#[tokio::test]
async fn a_server_restarted_empty_is_quarantined_for_every_client() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    // Long enough that a busy machine cannot use it up between the restart
    // and the calls that must see it.
    let settings = config(Duration::from_secs(10), Duration::from_secs(4));
    let holder = locker_with(&server, settings.clone()).await;
    wait_out_quarantine(&holder).await;
    assert!(holder.lock(&args("holder", "r")).await.unwrap());

    server.restart_empty();

    // The client that was connected notices the restart: its first call
    // may fail on the broken connection, and none is granted.
    let other = locker_with(&server, settings.clone()).await;
    let mut quarantined = 0;
    for client in [&holder, &other] {
        for _ in 0..3 {
            match client.lock(&args("intruder", "r")).await {
                Err(err) if is_quarantine(&err) => {
                    quarantined += 1;
                    break;
                }
                Err(_) => continue, // the broken connection, once
                Ok(granted) => panic!("granted={granted} right after an empty restart"),
            }
        }
    }
    assert_eq!(quarantined, 2, "both clients saw the quarantine");

    // The holder refreshes its entry back, and keeps it past the quarantine;
    // the refresh answers the quarantine, as every call does then.
    let err = holder
        .refresh_mode(&args("holder", "r"), LockMode::Write)
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    assert!(
        holds(&other, "holder").await,
        "the entry was not re-created"
    );
    wait_out_quarantine_keeping(&holder, Some(("holder", "r"))).await;
    assert!(!other.lock(&args("intruder", "r")).await.unwrap());
    assert!(holder.unlock(&args("holder", "r")).await.unwrap());
    assert!(other.lock(&args("intruder", "r")).await.unwrap());
}

#[tokio::test]
async fn a_server_that_may_evict_keys_is_refused() {
    let Some(evicting) =
        RedisServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"])
    else {
        return;
    };
    let err = RedisLocker::connect(&evicting.url(), RedisConfig::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("maxmemory-policy allkeys-lru"), "{text}");
    assert!(text.contains("set maxmemory-policy noeviction"), "{text}");

    // The same policy without a memory limit evicts nothing: accepted.
    let Some(unlimited) = RedisServer::start_with(&["--maxmemory-policy", "volatile-lru"]) else {
        return;
    };
    RedisLocker::connect(&unlimited.url(), RedisConfig::default())
        .await
        .expect("no limit, no eviction");
}

#[tokio::test]
async fn passwords_never_show_in_errors() {
    let Some(server) = RedisServer::start_with(&[
        "--user",
        "default",
        "off",
        "--user",
        "alice",
        "on",
        ">alice-pw-81",
        "~*",
        "&*",
        "+@all",
    ]) else {
        return;
    };
    let settings = config(Duration::from_secs(5), Duration::ZERO);
    let wrong = format!("redis://alice:wrong-pw-17@127.0.0.1:{}", server.port());
    let err = RedisLocker::connect(&wrong, settings.clone())
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("wrong-pw-17"), "{err}");

    // Lazily connected, the password is not in the call's error either.
    let lazy = RedisLocker::new(&wrong, settings.clone()).expect("a valid URL");
    let err = lazy.lock(&args("u", "p")).await.unwrap_err();
    assert!(!err.to_string().contains("wrong-pw-17"), "{err}");
    assert!(!format!("{lazy:?}").contains("wrong-pw-17"));

    let closed = "redis://alice:closed-pw-29@127.0.0.1:1";
    let err = RedisLocker::connect(closed, settings.clone())
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("closed-pw-29"), "{err}");
    let err = RedisLocker::new(
        "redis://alice:bad-pw-33@127.0.0.1:notaport",
        settings.clone(),
    )
    .unwrap_err();
    assert!(!err.to_string().contains("bad-pw-33"), "{err}");

    // The right password works, as an ACL user.
    let right = format!("redis://alice:alice-pw-81@127.0.0.1:{}", server.port());
    let redis = RedisLocker::connect(&right, settings)
        .await
        .expect("connect");
    assert!(redis.lock(&args("u", "p")).await.unwrap());
    assert!(redis.unlock(&args("u", "p")).await.unwrap());
}

#[tokio::test]
async fn tls_with_a_custom_root_and_an_acl_user() {
    let scratch =
        std::env::temp_dir().join(format!("quorum-lock-redis-tls-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    // A fixed self-signed certificate for 127.0.0.1 (tests/data/README.md).
    let cert = include_str!("../data/test-cert.pem");
    let (cert_path, key_path) = (scratch.join("cert.pem"), scratch.join("key.pem"));
    std::fs::write(&cert_path, cert).expect("write cert");
    std::fs::write(&key_path, include_str!("../data/test-key.pem")).expect("write key");
    let started = RedisServer::start_tls(
        &cert_path.display().to_string(),
        &key_path.display().to_string(),
        &[
            "--user",
            "default",
            "off",
            "--user",
            "bob",
            "on",
            ">bob-pw-64",
            "~*",
            "&*",
            "+@all",
        ],
    );
    let Some(server) = started else {
        let _ = std::fs::remove_dir_all(&scratch);
        return;
    };
    let url = format!("rediss://bob:bob-pw-64@127.0.0.1:{}", server.port());
    // This test checks trust and credentials, not speed: a debug build's
    // TLS handshake beside CI's background release builds once took past
    // the default 5 s call timeout, so each call here may take a minute.
    let patient = RedisConfig {
        call_timeout: Duration::from_secs(60),
        ..config(Duration::from_secs(5), Duration::ZERO)
    };
    let trusted = RedisConfig {
        tls_root_cert: Some(cert.as_bytes().to_vec()),
        ..patient.clone()
    };
    let redis = RedisLocker::connect(&url, trusted)
        .await
        .expect("connect over TLS");
    assert!(redis.lock(&args("u", "t")).await.unwrap());
    assert_eq!(redis.locks().await.unwrap().len(), 1);
    assert!(redis.unlock(&args("u", "t")).await.unwrap());

    // Without the root the certificate is not trusted; the error still
    // keeps the password to itself.
    let err = RedisLocker::connect(&url, patient).await.unwrap_err();
    assert!(!err.to_string().contains("bob-pw-64"), "{err}");
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);
}

#[tokio::test]
async fn a_server_that_is_not_redis_says_so() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Answers every connection like a web server would.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = tokio::spawn(async move {
        for _ in 0..8 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 256];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    });
    let url = format!("redis://127.0.0.1:{port}");
    let settings = config(Duration::from_secs(5), Duration::ZERO);
    let err = RedisLocker::connect(&url, settings.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("does not speak the Redis protocol"),
        "{err}"
    );
    // A lazy locker answers each call with the same error (logged once).
    let lazy = RedisLocker::new(&url, settings).expect("a valid URL");
    for _ in 0..2 {
        let err = lazy.lock(&args("u", "n")).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("does not speak the Redis protocol"),
            "{err}"
        );
    }
    assert!(!lazy.is_online());
    server.abort();
}

#[tokio::test]
async fn a_user_without_script_rights_is_told_what_was_refused() {
    let Some(server) = RedisServer::start_with(&[
        "--user",
        "reader",
        "on",
        ">reader-pw-5",
        "~*",
        "&*",
        "+@all",
        "-evalsha",
        "-eval",
    ]) else {
        return;
    };
    let url = format!("redis://reader:reader-pw-5@127.0.0.1:{}", server.port());
    let redis = RedisLocker::connect(&url, config(Duration::from_secs(5), Duration::ZERO))
        .await
        .expect("connecting needs no script");
    let err = redis.lock(&args("u", "n")).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("NOPERM"), "{text}");
    assert!(!text.contains("reader-pw-5"), "{text}");
}

/// The scripts Redis holds in its cache, from `INFO memory`.
async fn cached_scripts(server: &RedisServer) -> usize {
    let info = raw(server).await.cmd(&["INFO", "memory"]).await.text();
    info.lines()
        .find_map(|line| line.strip_prefix("number_of_cached_scripts:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO memory has number_of_cached_scripts")
}

/// A connection made after a restart loads the scripts itself, even when
/// the call that started it was dropped first: the coordinator drops a
/// slow node's refresh once a quorum confirmed, and a node that has to
/// reconnect is the slow one. Before, the script was loaded inside the
/// call, after a `NOSCRIPT`, so a restarted node's refreshes could all be
/// dropped before they ran and the holder's entry was never re-created
/// during the quarantine.
#[tokio::test]
async fn a_connection_made_after_a_restart_loads_the_scripts_though_its_caller_left() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let redis = locker_with(&server, config(Duration::from_secs(5), Duration::ZERO)).await;
    assert_eq!(cached_scripts(&server).await, 9, "loaded on connect");
    server.restart_empty();
    assert_eq!(cached_scripts(&server).await, 0, "the restart emptied it");
    let held = args("holder", "n");
    // The first calls meet the broken connection and drop it.
    for _ in 0..20 {
        if !redis.is_online() {
            break;
        }
        let _ = redis.refresh(&held).await;
    }
    assert!(!redis.is_online(), "the broken connection was not dropped");
    // A call that starts the new connection and is dropped at once, as a
    // slow node's refresh is.
    let call = redis.refresh(&held).now_or_never();
    assert!(call.is_none(), "connected without waiting: {call:?}");
    let give_up = Instant::now() + Duration::from_secs(10);
    while !redis.is_online() {
        assert!(Instant::now() < give_up, "no new connection within 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cached_scripts(&server).await, 9, "loaded on reconnect");
}

/// A flushed script cache costs a call one reload, not an error.
#[tokio::test]
async fn a_flushed_script_cache_is_loaded_again() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker_with(&server, config(Duration::from_secs(5), Duration::ZERO)).await;
    raw(&server).await.cmd(&["SCRIPT", "FLUSH"]).await;
    assert_eq!(cached_scripts(&server).await, 0);
    assert!(redis
        .lock(&args("u", "n"))
        .await
        .expect("lock after a flush"));
    assert_eq!(cached_scripts(&server).await, 9, "every script reloaded");
    assert!(redis.unlock(&args("u", "n")).await.expect("unlock"));
}
