//! Reproduces a past break: a place granted while its connection cannot take the push (stuck writing replies its client does not read) keeps only the charge made when it was asked, which lapses while the entry it became still stands, so the table holds more than the server's byte cap.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::node::{args, start_over, TOKEN};
use crate::wire::{
    authenticate_as, frame, lock_wait_request, read_frame, request, OP_HEALTH, QUEUED, REPLY_WAIT,
    VERSION_3,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{LockerConfig, NetLocker};
use tokio::io::AsyncWriteExt;

/// docs/lock-servers.md, "Memory budget": the lock table's cap
/// (`max_lock_bytes`) counts each name of a lock or of a place in line;
/// src/net/ledger.rs: "a charge never lapses before the entries it pays
/// for". A server over a locker of a 4 s validity (so a charge lapses 6 s
/// after its uid was last touched), with a cap of 3,500 bytes: two single-name
/// locks fit (about 1,660 bytes each), a single-name and a two-name one
/// (about 2,700) do not. A holder locks "x"; a raw version-3 client asks a
/// pushed wait on "x" (queued: the place is charged, touched at `asked`),
/// then floods Health requests without reading their replies until the
/// server is stuck writing to it, so it forwards no push. 3.5 s after
/// `asked` (or once the flood is done, if later) the holder releases: the
/// table grants the waiter's place, an entry that lasts 4 s from then.
/// The break: nothing touched its charge (the session touched it only
/// when it forwarded the push), so 3 s after the grant, past `asked` +
/// 6 s, the charge had lapsed, another client's lock on "y" and "z" was
/// admitted under the cap, and the table kept both, more than the cap
/// lets it keep. (Half a second after the grant the same lock is refused
/// by the cap: the control.) The grant now touches the charge. Bounded:
/// each call
/// 10 s, the flood 2,000 writes of 500 ms at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_while_its_connection_is_stuck_stays_charged_while_its_entry_stands() {
    let locker_config = LockerConfig {
        validity: Duration::from_secs(4),
        ..LockerConfig::default()
    };
    let mut config = ServerConfig::new(TOKEN);
    config.max_lock_bytes = 3_500;
    config.idle_timeout = None;
    let node = start_over(locker_config, config).await;
    let locker = node.locker.clone();
    let stats = node.stats.clone();
    let addr = node.addr.clone();
    let connect = || RemoteLocker::connect(addr.clone(), RemoteConfig::new(TOKEN));
    let within = Duration::from_secs(10);
    let holder = connect().await.unwrap();
    let held = args("holder", &["x".to_string()]);
    assert_eq!(
        tokio::time::timeout(within, holder.lock(&held))
            .await
            .unwrap(),
        Ok(true)
    );

    let (mut deaf, welcome) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 3], "accepted");
    // Before the place's charge is made: it is touched after this.
    let asked = tokio::time::Instant::now();
    let wait = lock_wait_request(1, "waiter", &["x"], (1, 1), Duration::from_secs(60), true);
    deaf.write_all(&frame(&wait)).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut deaf, 4096))
        .await
        .expect("a reply within 5 s")
        .unwrap();
    assert_eq!(reply, [1, REPLY_WAIT, QUEUED], "queued");
    let batch: Vec<u8> = (2..=10_001u64)
        .flat_map(|id| frame(&request(id, OP_HEALTH)))
        .collect();
    let mut blocked = false;
    for _ in 0..2_000 {
        match tokio::time::timeout(Duration::from_millis(500), deaf.write_all(&batch)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => panic!("the server closed the connection: {err}"),
            Err(_) => {
                blocked = true;
                break;
            }
        }
    }
    assert!(
        blocked,
        "the server kept taking requests whose replies were not read"
    );
    // The grant comes 3.5 s after the wait was asked at the earliest,
    // once the server is stuck: past 2 s, so that its entry (4 s from the
    // grant) would outlive a charge lapsing 6 s after the wait was asked.
    let grant_at = (asked + Duration::from_millis(3_500)).max(tokio::time::Instant::now());
    tokio::time::sleep_until(grant_at).await;
    assert_eq!(
        tokio::time::timeout(within, holder.unlock(&held))
            .await
            .unwrap(),
        Ok(true)
    );
    let waiter_holds = || locker.snapshot().iter().any(|info| info.uid == "waiter");
    // The grant is made as the release frees "x".
    for _ in 0..50 {
        if waiter_holds() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(waiter_holds(), "the release granted the waiter's place");

    let other = connect().await.unwrap();
    let wanted = args("other", &["y".to_string(), "z".to_string()]);
    tokio::time::sleep_until(grant_at + Duration::from_millis(500)).await;
    let before = tokio::time::timeout(within, other.lock(&wanted))
        .await
        .unwrap();
    assert!(
        before.is_err(),
        "the control: the cap refuses a second lock while the waiter's is charged: {before:?}"
    );
    // Past the lapse of a charge untouched since the wait was asked (6 s),
    // within the validity of the grant's entry (4 s from the grant).
    tokio::time::sleep_until(grant_at + Duration::from_millis(3_000)).await;
    let after = tokio::time::timeout(within, other.lock(&wanted))
        .await
        .unwrap();
    let still = waiter_holds();
    let entries = locker.snapshot().len();
    assert!(
        !(after == Ok(true) && still),
        "{:?} after the waiter asked, its granted entry still stands (4 s after its grant), but its \
         charge lapsed: a two-name lock was admitted beside it under a cap of 3,200 bytes \
         that fits one of them, and the table keeps {entries} entries ({} bytes charged)",
        asked.elapsed(),
        stats.lock_bytes()
    );
    drop(deaf);
    drop(node);
}
