//! Fencing tokens on Redis nodes: strictly increasing between conflicting
//! holders whatever each client's settings, through a restart that brings
//! back an older snapshot, and never pushed out of range by a floor.
//!
//! Each test starts its own `redis-server` and stops it by its PID; see
//! `redis_support` for how a missing `redis-server` is handled.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quorum_lock::redis::RedisConfig;
use quorum_lock::{Error, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply};
use tokio::time::{sleep, Instant};

use crate::redis_support::{locker_with, raw, RedisServer};

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["fenced".to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/fencing.rs".into(),
        quorum: 1,
    }
}

fn config(validity: Duration, quarantine: Duration) -> RedisConfig {
    RedisConfig {
        validity,
        quarantine,
        call_timeout: Duration::from_secs(2),
        ..RedisConfig::default()
    }
}

fn wall_ns() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    u64::try_from(since.as_nanos()).expect("nanoseconds fit 64 bits until 2554")
}

/// Writes `uid`, draws its token with `floor`, and unlocks.
async fn write_token(locker: &Arc<dyn NetLocker>, uid: &str, floor: u64) -> u64 {
    assert!(locker.lock(&args(uid)).await.unwrap(), "{uid} locks");
    let token = locker
        .fence(&args(uid), LockMode::Write, floor)
        .await
        .unwrap_or_else(|e| panic!("{uid}'s token: {e}"))
        .expect("held");
    assert!(locker.unlock(&args(uid)).await.unwrap());
    token
}

/// A past break of the restart rules, fixed: a freed resource's counter used to start from the
/// server's clock plus the *calling client's* validity, so a client with
/// a shorter validity drew a token below one drawn just before.
#[tokio::test]
async fn clients_with_different_validities_draw_increasing_tokens() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let long = locker_with(&server, config(Duration::from_secs(60), Duration::ZERO)).await;
    let short = locker_with(&server, config(Duration::from_secs(1), Duration::ZERO)).await;
    let first = write_token(&long, "long-validity", 0).await;
    let second = write_token(&short, "short-validity", 0).await;
    assert!(
        second > first,
        "a later writer drew {second}, not above the earlier writer's {first}"
    );
    let third = write_token(&long, "long-again", 0).await;
    assert!(third > second);
}

/// `RedisConfig::validity = Duration::MAX` once made every token a
/// floating-point number that does not parse as a `u64`.
#[tokio::test]
async fn a_validity_of_duration_max_draws_usable_tokens() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let forever = locker_with(&server, config(Duration::MAX, Duration::ZERO)).await;
    let usual = locker_with(&server, config(Duration::from_secs(60), Duration::ZERO)).await;
    let first = write_token(&forever, "forever-1", 0).await;
    let second = write_token(&usual, "usual", 0).await;
    let third = write_token(&forever, "forever-2", 0).await;
    assert!(first < second && second < third, "{first} {second} {third}");
}

/// No client can push a node's tokens beyond its clock plus the
/// tolerance, and a counter that cannot grow is an error, never a repeat.
#[tokio::test]
async fn floors_ahead_of_the_clock_and_counters_at_the_end_are_refused() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker_with(&server, config(Duration::from_secs(60), Duration::ZERO)).await;
    assert!(redis.lock(&args("holder")).await.unwrap());
    for floor in [wall_ns() + 60_000_000_000, u64::MAX] {
        let refused = redis.fence(&args("holder"), LockMode::Write, floor).await;
        match refused {
            Err(Error::InvalidArgument(why)) => {
                assert!(why.contains("ahead of"), "{why}")
            }
            other => panic!("a floor of {floor} was not refused: {other:?}"),
        }
    }
    // A floor within the tolerance is honoured, and the next token is above.
    let near = wall_ns() + 500_000_000;
    let token = redis
        .fence(&args("holder"), LockMode::Write, near)
        .await
        .unwrap()
        .expect("held");
    assert!(token >= near);
    let next = redis
        .fence(&args("holder"), LockMode::Write, 0)
        .await
        .unwrap()
        .expect("held");
    assert!(next > token);

    // The node's high-water mark at the end of the range: the next token
    // cannot be drawn, and says so.
    let admin = raw(&server).await;
    admin
        .cmd(&["SET", "quorum-lock:", &u64::MAX.to_string()])
        .await;
    match redis.fence(&args("holder"), LockMode::Write, 0).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("cannot grow"), "{why}"),
        other => panic!("a counter at u64::MAX drew {other:?}"),
    }
    // Listing and forced unlocks by uid skip the high-water mark.
    assert_eq!(redis.locks().await.unwrap().len(), 1);
    let everything = LockArgs {
        resources: Vec::new().into(),
        ..args("holder")
    };
    assert!(redis.force_unlock(&everything).await.unwrap());
}

/// Calls `f` until it stops answering the quarantine, for at most 15 s.
async fn past_quarantine<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let give_up = Instant::now() + Duration::from_secs(15);
    loop {
        match f().await {
            Ok(value) => return value,
            Err(err) if Instant::now() < give_up => {
                // The quarantine, or the connection the restart broke.
                let _ = err;
                sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("still failing after 15 s: {err}"),
        }
    }
}

/// A past break of the restart rules, fixed: readers keep a resource's hash alive while Redis
/// is killed and restarted from an older snapshot; the counter in the
/// snapshot is behind a reader's token, and the writer after the readers
/// once drew that very token again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_from_an_older_snapshot_never_draws_a_token_again() {
    let Some(mut server) = RedisServer::start_persistent(false) else {
        return;
    };
    // A quarantine that covers the validity, as it must when nodes restart.
    let validity = Duration::from_secs(3);
    let redis = locker_with(&server, config(validity, validity)).await;
    assert!(past_quarantine(|| async { redis.rlock(&args("reader-0")).await }).await);
    // Tokens wait for a quarantine of at least `FENCE_QUARANTINE`.
    let first =
        past_quarantine(|| async { redis.fence(&args("reader-0"), LockMode::Read, 0).await })
            .await
            .expect("held");

    let admin = raw(&server).await;
    admin.cmd(&["SAVE"]).await;

    // A second reader, drawn after the snapshot, with a floor a little
    // ahead of the clock (as a faster node's token would be).
    assert!(redis.rlock(&args("reader-1")).await.unwrap());
    let floor = wall_ns() + 900_000_000;
    let second = redis
        .fence(&args("reader-1"), LockMode::Read, floor)
        .await
        .unwrap()
        .expect("held");
    assert!(second > first);

    server.restart();

    // Both readers keep refreshing through the quarantine (reader-1's
    // entry is re-created). A writer then queues behind them, which keeps
    // the resource's hash, and the counter restored with it, alive when
    // the readers leave.
    let refresh_until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < refresh_until {
        for uid in ["reader-0", "reader-1"] {
            let _ = redis.refresh_mode(&args(uid), LockMode::Read).await;
        }
        sleep(Duration::from_millis(250)).await;
    }
    let wait = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(3),
        wake: None,
    };
    let queued = past_quarantine(|| async {
        redis
            .lock_wait(&args("writer"), LockMode::Write, &wait)
            .await
    })
    .await;
    assert_eq!(
        queued,
        WaitReply::Refused,
        "a reservation behind the readers"
    );
    for uid in ["reader-0", "reader-1"] {
        assert!(redis.runlock(&args(uid)).await.unwrap());
    }
    let granted = redis
        .lock_wait(&args("writer"), LockMode::Write, &wait)
        .await
        .unwrap();
    assert_eq!(granted, WaitReply::Granted);
    let writer =
        past_quarantine(|| async { redis.fence(&args("writer"), LockMode::Write, 0).await })
            .await
            .expect("held");
    assert!(
        writer > second,
        "the writer after a restart drew {writer}, not above the reader's {second}"
    );
}
