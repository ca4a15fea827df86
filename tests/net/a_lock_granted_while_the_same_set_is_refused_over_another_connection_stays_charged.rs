//! docs/lock-servers.md, "Limits and memory": "Locks count against their
//! connection (100,000 locks or 64 MiB) and against the whole server
//! (1 GiB)"; "Nothing is charged without a limit check" and the ledger
//! "errs on the side of counting too much" (src/net/ledger.rs).
//!
//! Uid U asks, at the same moment, for the write lock on 1,000 names over
//! connection A and for the read lock on the same names over connection B
//! (the last name is read by another uid, so the write lock is refused and
//! the read lock granted). A's request charges the set first (`Added`);
//! B's, finding the set charged, only touches it (`Already`) while A's
//! lock runs; A's lock is refused, and its undo removes the set's charge
//! whole (`Gone::Reserved`), though B's read lock, granted under that very
//! charge, now stands on the 1,000 names. The table keeps the entries with
//! nothing charging them, against neither B's limits nor the server's
//! total, for as long as they live (a validity). Repeated, a client holds
//! as much as it likes beyond its limits.
//! Real time (sockets); at most 300 rounds and 60 s.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, frame, lock_request, read_frame, response, OP_LOCK, OP_RLOCK, OP_RUNLOCK, REPLY_BOOL,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

async fn reply(stream: &mut TcpStream, id: u64) -> Vec<u8> {
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
        .await
        .expect("answered in time")
        .expect("a reply");
    let (got, body) = response(&reply);
    assert_eq!(got, id);
    body.to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_granted_while_the_same_set_is_refused_over_another_connection_stays_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut b, mut r] = authenticated(&node).await;
    assert_eq!(
        call(&mut r, 1, &lock_request(1, OP_RLOCK, "r", &["shared"])).await,
        [REPLY_BOOL, 1]
    );
    let started = tokio::time::Instant::now();
    let (mut granted, mut rounds) = (0, 0);
    for round in 0..300u64 {
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
        rounds += 1;
        let uid = format!("U{round}");
        let mut names: Vec<String> = (0..999).map(|i| format!("r{round}n{i}")).collect();
        names.push("shared".to_owned());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let id = 10 + round;
        let before = node.stats.lock_bytes();
        // A's write lock first, B's read lock right behind it.
        a.write_all(&frame(&lock_request(id, OP_LOCK, &uid, &names)))
            .await
            .unwrap();
        b.write_all(&frame(&lock_request(id, OP_RLOCK, &uid, &names)))
            .await
            .unwrap();
        assert_eq!(
            reply(&mut a, id).await,
            [REPLY_BOOL, 0],
            "the write lock is refused"
        );
        assert_eq!(
            reply(&mut b, id).await,
            [REPLY_BOOL, 1],
            "the read lock is granted"
        );
        granted += 1;
        let held = node.stats.lock_bytes();
        let entries = node
            .locker
            .snapshot()
            .iter()
            .filter(|e| e.uid == uid)
            .count();
        assert_eq!(entries, 1000, "U reads its 1,000 names");
        assert!(
            held > before,
            "round {round}: U's read lock on 1,000 names stands, granted over B, but the \
             server's charge did not grow ({before} bytes before, {held} after, {entries} \
             entries of U in the table): the table \
             keeps entries nothing charges"
        );
        assert_eq!(
            call(
                &mut b,
                100_000 + id,
                &lock_request(100_000 + id, OP_RUNLOCK, &uid, &names)
            )
            .await,
            [REPLY_BOOL, 1]
        );
    }
    eprintln!("{granted} read locks granted and charged in {rounds} rounds");
}
