//! Waiting in line on Redis nodes while a locker's push subscription is
//! down: pub/sub delivers nothing, and every rule of waiting must still
//! hold through the waiters' re-checks alone.
//!
//! The subscription is held down the way a busy or misconfigured server
//! would: `maxclients` set to the clients connected now, so the locker's
//! existing connection keeps working while its push subscription cannot
//! connect (`redis_support::refuse_new_clients`).
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::{
    Dsync, Error, LockArgs, LockMode, NetLocker, Ticket, Timeouts, WaitArgs, WaitReply,
};
use tokio::time::{sleep, timeout, Instant};

use crate::redis_support::{admit_clients, raw, refuse_new_clients, RedisServer};

fn config() -> RedisConfig {
    RedisConfig {
        validity: Duration::from_secs(60),
        quarantine: Duration::ZERO,
        call_timeout: Duration::from_millis(500),
        ..RedisConfig::default()
    }
}

async fn redis_locker(server: &RedisServer) -> Arc<dyn NetLocker> {
    Arc::new(
        RedisLocker::connect(&server.url(), config())
            .await
            .expect("connect to the test redis-server"),
    )
}

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/waiting.rs".into(),
        quorum: 1,
    }
}

/// Whether `locker`'s node lists a holder of `resource` other than `not`.
async fn held_by_other(locker: &Arc<dyn NetLocker>, resource: &str, not: &str) -> bool {
    locker
        .locks()
        .await
        .expect("a node lists its entries")
        .iter()
        .any(|e| e.resource == resource && e.uid != not)
}

/// Polls `check` every 20 ms for at most `within`.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= give_up {
            return false;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// A past break of the restart rules, fixed. Two nodes (a write quorum of both); an older
/// waiter O holds node 1, and a younger waiter Y (a real `Dsync`) is
/// granted node 0 while its push subscription to node 0 is down, then
/// queues on node 1 behind O. When O then queues on node 0 behind Y, Y
/// must step back, or they wait for each other forever.
///
/// `back_up`: the subscription comes back right after Y's grant (the
/// wound can be pushed from then on, and was once lost forever because
/// Y's entry named no channel), or stays down the whole time (only the
/// re-checks can carry the wound).
async fn older_and_younger_waiter(back_up: bool) {
    let Some(servers) = RedisServer::start_many(2) else {
        return;
    };
    let older = [
        redis_locker(&servers[0]).await,
        redis_locker(&servers[1]).await,
    ];
    let younger = vec![
        redis_locker(&servers[0]).await,
        redis_locker(&servers[1]).await,
    ];
    let mut admin = raw(&servers[0]).await;

    let ticket = Ticket::now();
    // O's requests keep reservations (no pushes): it asks again itself.
    let wait = WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(2),
        wake: None,
    };
    let o = args("older", "r");
    assert_eq!(
        older[1]
            .lock_wait(&o, LockMode::Write, &wait)
            .await
            .unwrap(),
        WaitReply::Granted
    );

    refuse_new_clients(&mut admin).await;
    let ds = Dsync::builder(younger)
        .timeouts(Timeouts {
            // With the subscription coming back, the first re-check comes
            // after it is up: the case that used to wait forever.
            wait_recheck: if back_up {
                Duration::from_secs(3)
            } else {
                Duration::from_millis(300)
            },
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    let y = tokio::spawn({
        let mutex = ds.rw_mutex(["r"]).expect("a valid name");
        async move {
            let guard = mutex.lock().await?;
            guard.unlock().await?;
            Ok::<(), Error>(())
        }
    });
    assert!(
        eventually(Duration::from_secs(5), || held_by_other(
            &older[0], "r", "older"
        ))
        .await,
        "the younger waiter was not granted node 0"
    );
    if back_up {
        admit_clients(&mut admin).await;
    }

    // O queues on node 0 behind Y's grant and keeps asking, as a waiter does.
    let give_up = Instant::now() + Duration::from_secs(10);
    let mut granted = false;
    while Instant::now() < give_up {
        let _ = older[1].lock_wait(&o, LockMode::Write, &wait).await;
        if older[0]
            .lock_wait(&o, LockMode::Write, &wait)
            .await
            .unwrap()
            == WaitReply::Granted
        {
            granted = true;
            break;
        }
        sleep(Duration::from_millis(200)).await;
    }
    admit_clients(&mut admin).await;
    assert!(
        granted,
        "the younger waiter never stepped back for the older one (back_up: {back_up})"
    );
    assert!(older[0].unlock(&o).await.unwrap());
    assert!(older[1].unlock(&o).await.unwrap());
    timeout(Duration::from_secs(20), y)
        .await
        .expect("the younger waiter gets the lock once the older one is done")
        .expect("joins")
        .expect("the younger waiter's lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_granted_without_pushes_steps_back_for_an_older_one_once_pushes_are_back() {
    older_and_younger_waiter(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_granted_without_pushes_steps_back_for_an_older_one_with_pushes_down() {
    older_and_younger_waiter(false).await;
}

/// A waiter whose push subscription is down, then cancelled, leaves no
/// place behind that keeps others out: its place was once answered
/// `Refused` although Redis kept it, so nobody removed it when the waiter
/// left, and a plain lock was refused until it expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_without_pushes_leaves_no_place_behind() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let holder = Dsync::new(vec![redis_locker(&server).await]).expect("valid settings");
    let other = Dsync::new(vec![redis_locker(&server).await]).expect("valid settings");
    let waiter = Dsync::builder(vec![redis_locker(&server).await])
        .timeouts(Timeouts {
            // Places live 3 × this: far beyond the test's bound.
            wait_recheck: Duration::from_secs(10),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    let mut admin = raw(&server).await;
    refuse_new_clients(&mut admin).await;

    let held = holder.rw_mutex(["x"]).unwrap().lock().await.expect("free");
    let waiting = tokio::spawn({
        let mutex = waiter.rw_mutex(["x"]).unwrap();
        async move { mutex.lock().await.map(drop) }
    });
    let queued = eventually(Duration::from_secs(5), || {
        let admin = admin.clone();
        async move {
            let fields = match admin.try_cmd(&["HKEYS", "quorum-lock:x"]).await {
                Ok(reply @ crate::redis_support::Reply::Array(_)) => reply.texts(),
                _ => Vec::new(),
            };
            fields.iter().any(|f| f.starts_with("q:"))
        }
    })
    .await;
    assert!(queued, "the waiter never queued");
    waiting.abort();
    let _ = waiting.await;
    held.unlock().await.expect("unlock");

    let other = other.rw_mutex(["x"]).unwrap();
    let free = eventually(Duration::from_secs(2), || {
        let other = other.clone();
        async move {
            match other.try_lock().await {
                Ok(guard) => {
                    guard.unlock().await.expect("unlock");
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await;
    admit_clients(&mut admin).await;
    assert!(
        free,
        "the cancelled waiter's place kept a plain lock out after its holder left"
    );
}
