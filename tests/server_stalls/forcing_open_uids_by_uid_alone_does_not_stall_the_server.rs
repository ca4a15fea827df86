//! Reproduces a past break: a client with the ordinary token sends force-unlocks by uid alone (no names), pipelined over a few connections; each makes the server walk its whole lock table, every name's holders and line, so a table within the limits keeps the server's threads busy for seconds and other clients' calls wait.
//!
//! docs/lock-servers.md, "A compromised client": "a client may force open
//! a uid it names" (PROTOCOL.md: the client token may send `ForceUnlock`
//! with a uid), can fill limits, "each of which bounds it" (100,000 locks
//! per connection, 1 GiB of table: about 700,000 single-name locks), and
//! must not make the server stall. A force by uid alone goes to
//! `LocalLocker::force_unlock_as` (src/local/forcing.rs), which asks every
//! shard's `release_everywhere` (src/local/table.rs): a pass over every
//! name of the table, every holder and every place in line of each, to
//! find the uid's, whether or not the server ever saw the uid. One such
//! request of a few dozen bytes costs a pass over the whole table; a
//! connection's batch of pipelined requests runs without yielding its
//! thread.
//!
//! The server's table holds 300,000 single-name locks (made on the table
//! itself, as three connections' 100,000 would make them, within the
//! 1 GiB), and runs on a runtime of two worker threads (as `quorum-lock
//! server` on a two-core machine). One force by an unknown uid alone takes
//! 32 to 40 ms on the debug build. Four connections then each send 128 at
//! once (uids nobody holds), while another client locks and unlocks a
//! free name every 10 ms: the slowest answers after 10 to 18 s. Naming one
//! resource in each force instead (a release by uid and name), the same
//! flood passes unnoticed.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::{LocalLocker, LockArgs, NetLocker};

use crate::args;

const LOCKS: usize = 300_000;
const ATTACKERS: usize = 4;
const PIPELINED: usize = 128;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn forcing_open_uids_by_uid_alone_does_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::new());
    let built = Instant::now();
    for i in 0..LOCKS {
        let lock = LockArgs {
            resources: vec![format!("name-{i:07}")].into(),
            ..args(&format!("{i:08}-0000-0000-0000-000000000000"))
        };
        assert_eq!(locker.lock(&lock).await, Ok(true), "control");
    }
    eprintln!("built in {:?}", built.elapsed());
    let server = crate::TwoThreads::serve(locker.clone()).await;
    let _addr = server.addr.clone();
    let connect = || server.patient(Duration::from_secs(60));
    let probe = connect().await;
    let mut attackers = Vec::new();
    for _ in 0..ATTACKERS {
        attackers.push(Arc::new(connect().await));
    }
    let one = Instant::now();
    let forced = probe
        .force_unlock(&LockArgs {
            resources: Vec::new().into(),
            ..args("nobody-0000-0000-0000-000000000000")
        })
        .await;
    eprintln!("one force by uid {forced:?} took {:?}", one.elapsed());

    let attack = tokio::spawn(async move {
        let rounds = attackers.iter().enumerate().map(|(a, attacker)| {
            let attacker = attacker.clone();
            async move {
                let calls = (0..PIPELINED).map(|i| {
                    let attacker = attacker.clone();
                    async move {
                        let by_uid = LockArgs {
                            resources: Vec::new().into(),
                            ..args(&format!("force-{a:02}-{i:04}-0000-000000000000"))
                        };
                        attacker.force_unlock(&by_uid).await
                    }
                });
                join_all(calls).await
            }
        });
        join_all(rounds).await
    });
    let slowest = crate::slowest_probe_while(&probe, &attack).await;
    let _ = attack.await;
    eprintln!("slowest probe {slowest:?}");
    drop(server);
    assert!(
        slowest < crate::STALL_BAR,
        "while {ATTACKERS} connections each sent {PIPELINED} force-unlocks by uid alone \
         (uids nobody holds; the table holds {LOCKS} locks, taken with the ordinary token within \
         its limits), a lock and unlock of a free name answered after {slowest:?}: the server \
         stalled walking the whole table for each"
    );
}
