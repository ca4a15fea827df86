//! Reproduces a past break: over a locker whose validity is under a second, a place's charge lapses at twice the validity, but nothing passes over the table to give back the place's memory more often than once a second, so the charge is pruned while the place still stands in the table.
//!
//! docs/lock-servers.md: "A lock stays counted until it is released, or
//! until it expired and the locker's next expiry pass (every second, or
//! every validity when that is shorter) gave back its memory", and "A
//! place is charged as a lock is while its connection keeps it, and as
//! long after it expires as a lock." The ledger's lapse is the validity
//! plus `min(1 s, validity)`, but on a server nobody calls, the only
//! passes over the table are the expiry timer's (every second while it
//! holds no entry, or at the expiry of an entry it knew of when it went
//! to sleep) and the metrics sampler's (every second): a place expires
//! at the validity and stays in memory up to a second longer, while its
//! charge lapses at twice a validity of 100 ms.
//!
//! A server over a locker of 100 ms validity, idle timeout 300 ms.
//! Aligned with the server's once-a-second passes (which start with it),
//! 200 ms after one of them: C locks "c"; A asks for a place on "c" right
//! after (a reservation its connection keeps for 60 s, so A is never
//! closed for idleness). C falls silent: 300 ms later its idle check
//! finds its charge untouched for the validity and prunes every charge
//! untouched for the lapse (200 ms), A's place's among them, and closes C.
//! Then, still 350 ms before the next pass, the ledger is read, and then
//! the table: the place's charge is gone, the place stands. Ordered: the
//! charge was read gone before the place was seen still standing (nobody
//! asks again, so the place cannot have come back). Every wait bounded.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use crate::node::{args, reservation, TOKEN};
use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LocalLocker, LockMode, LockerConfig, NetLocker, WaitReply};

const VALIDITY: Duration = Duration::from_millis(100);
const IDLE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_of_a_locker_with_a_short_validity_stays_charged_until_its_memory_is_given_back() {
    let locker = Arc::new(LocalLocker::with_config(
        "node",
        LockerConfig {
            validity: VALIDITY,
            quarantine: Duration::ZERO,
        },
    ));
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(IDLE);
    let server = LockServer::new(locker.clone(), config).expect("valid config");
    let stats = server.stats();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound, serve) = server
        .bind("127.0.0.1:0".parse().unwrap(), async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    tokio::spawn(serve);
    // The server's once-a-second passes (sampler, expiry timer) start now.
    let started = tokio::time::Instant::now();
    let connect = || RemoteLocker::connect(bound.to_string(), RemoteConfig::new(TOKEN));
    tokio::time::sleep_until(started + Duration::from_millis(2150)).await;
    let c = tokio::time::timeout(Duration::from_secs(5), connect())
        .await
        .expect("connects within 5 s")
        .unwrap();
    let a = tokio::time::timeout(Duration::from_secs(5), connect())
        .await
        .expect("connects within 5 s")
        .unwrap();
    tokio::time::sleep_until(started + Duration::from_millis(2200)).await;
    let names = vec!["c".to_string()];
    let locked = tokio::time::timeout(Duration::from_secs(5), c.lock(&args("c", &names)))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    assert!(locked, "C locks a free name");
    let locked_at = tokio::time::Instant::now();
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        a.lock_wait(&args("a", &names), LockMode::Write, &reservation()),
    )
    .await
    .expect("an answer within 5 s")
    .unwrap();
    assert_eq!(asked, WaitReply::Refused, "a reservation behind C");
    assert!(
        locked_at.elapsed() < VALIDITY / 2,
        "A asked while C's entry was live (the test ran too slowly to say anything)"
    );
    assert_eq!(locker.waiting(), 1, "A's place stands");
    assert!(stats.lock_bytes() > 0, "C's lock and A's place are charged");
    // C's idle check (300 ms after its lock) has pruned what lapsed.
    tokio::time::sleep_until(locked_at + IDLE + Duration::from_millis(100)).await;
    let charged = stats.lock_bytes();
    let places = locker.waiting();
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "read before the server's next pass (the test ran too slowly to say anything)"
    );
    assert!(
        charged > 0 || places == 0,
        "A's place was charged nothing ({charged} bytes charged in all) while the table still \
         kept it ({places} place): its charge lapsed at twice the validity of {VALIDITY:?}, but \
         the table gives back an expired place's memory only at its next pass, up to a second \
         later"
    );
    drop((a, c));
    drop(stop);
}
