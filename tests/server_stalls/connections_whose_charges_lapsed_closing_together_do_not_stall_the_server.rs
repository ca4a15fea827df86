//! Reproduces a past break: a client with the ordinary token lets the charges of a few hundred connections lapse together while the ledger keeps hundreds of thousands of lapsed charges; each connection's idle check scans every charge of the server under the ledger's one mutex, so every lock call waits seconds.
//!
//! docs/lock-servers.md, "A compromised client": a client "can fill
//! limits, each of which bounds it" (100,000 locks and 64 MiB per
//! connection, 1 GiB in all, `max_connections` connections, from enough
//! addresses), and must not make the server stall. A connection silent
//! for the idle timeout asks `Session::holds_nothing`
//! (src/net/queueing.rs), which asks `Ledger::holds` (src/net/ledger.rs):
//! once the connection's newest charge is a validity old, that walks every
//! charge of the whole server (every uid, whichever connection it counts
//! against) to find the connection's own, holding the ledger's mutex,
//! which every lock, refresh and wait of every client takes. A charge
//! whose entries expired stays in the ledger until its own connection's
//! check or a prune finds it, so the walk is as long as the locks a client
//! ever held within the limits; and one such walk is made per connection,
//! so a client's connections whose charges lapse together make as many
//! walks of the whole ledger back to back.
//!
//! Here the locker's validity is 3 s and the idle timeout 1 s (settings;
//! the walk's cost does not depend on them), and one address may hold
//! every client connection (standing for a client with enough addresses).
//! Eight connections take 38,000 single-name locks each (about 63 MB of
//! charge each, within their 64 MiB; 304,000 charges in all, within the
//! 1 GiB) and never refresh them; they keep talking, so their own checks
//! never run. Once those entries expired, 440 other connections each take
//! one lock and fall silent: a validity later their idle checks each walk
//! the 304,000 lapsed charges. Another client locks and unlocks a free
//! name every 10 ms meanwhile: the slowest answers after 3.4 to 7.4 s on
//! the debug build, and the server closes the probe's connection under a
//! call (its lock expired during the stall, so it held nothing). Without
//! the 440 silent connections the slowest answers after 6 ms; with them
//! but only 4,000 filler charges, after 27 ms.
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use quorum_lock::net::ServerConfig;
use quorum_lock::{LocalLocker, LockArgs, LockerConfig, NetLocker};

use crate::args;
use crate::node::TOKEN;

const VALIDITY: Duration = Duration::from_secs(3);
const FILLERS: usize = 8;
const LOCKS: usize = 38_000;
const SILENT: usize = 440;

fn lock_of(tag: &str, i: usize) -> LockArgs {
    LockArgs {
        resources: vec![format!("{tag}-{i:07}")].into(),
        ..args(&format!("{tag}-{i:07}-0000-0000-000000000000"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    debug_assertions,
    ignore = "times a loaded server: run optimized, `cargo test --release --all-features --test server_stalls` (CI does)"
)]
async fn connections_whose_charges_lapsed_closing_together_do_not_stall_the_server() {
    let _one_at_a_time = crate::HEAVY.lock().await;
    let locker = Arc::new(LocalLocker::with_config(
        "stalls",
        LockerConfig {
            validity: VALIDITY,
            ..LockerConfig::default()
        },
    ));
    let mut config = ServerConfig::new(TOKEN);
    config.idle_timeout = Some(Duration::from_secs(1));
    config.max_connections_per_address = config.max_connections;
    let server = crate::TwoThreads::serve_with(locker.clone(), config).await;
    let connect = || server.patient(Duration::from_secs(60));

    // The fillers' charges: taken, never refreshed, kept by connections
    // that keep talking.
    let built = Instant::now();
    let mut fillers = Vec::new();
    for _ in 0..FILLERS {
        fillers.push(Arc::new(connect().await));
    }
    let fills = fillers.iter().enumerate().map(|(f, filler)| async move {
        let mut granted = 0;
        for chunk in 0..LOCKS / 500 {
            let calls = (0..500).map(|j| {
                let lock = lock_of(&format!("fill{f}"), chunk * 500 + j);
                async move { filler.lock(&lock).await }
            });
            granted += join_all(calls)
                .await
                .into_iter()
                .filter(|r| *r == Ok(true))
                .count();
        }
        granted
    });
    let granted: usize = join_all(fills).await.into_iter().sum();
    eprintln!("{granted} filler locks in {:?}", built.elapsed());
    assert_eq!(granted, FILLERS * LOCKS, "control: within the limits");
    let talking = Arc::new(AtomicBool::new(true));
    let chatter = {
        let (fillers, talking) = (fillers.clone(), talking.clone());
        tokio::spawn(async move {
            // Bounded: the scene ends well within this.
            for round in 0..600 {
                if !talking.load(Ordering::Relaxed) {
                    break;
                }
                for (f, filler) in fillers.iter().enumerate() {
                    let _ = filler.refresh(&lock_of(&format!("talk{f}"), round)).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    // The fillers' entries expire; their charges stay.
    tokio::time::sleep(VALIDITY + Duration::from_secs(2)).await;

    let mut silent = Vec::new();
    for _ in 0..SILENT {
        silent.push(connect().await);
    }
    let taken = join_all(
        silent
            .iter()
            .enumerate()
            .map(|(s, c)| async move { c.lock(&lock_of("silent", s)).await }),
    )
    .await;
    assert!(taken.iter().all(|r| *r == Ok(true)), "control: {taken:?}");
    let quiet_since = Instant::now();
    // Connected now: it holds nothing, and would be closed after a second
    // of silence too.
    let probe = connect().await;

    let free = |i: usize| LockArgs {
        resources: vec!["free".to_owned()].into(),
        ..args(&format!("probe-{i:04}-0000-0000-000000000000"))
    };
    let mut slowest = Duration::ZERO;
    let mut failed = Vec::new();
    let mut i = 0;
    while quiet_since.elapsed() < VALIDITY + Duration::from_secs(6) && i < 2000 {
        let started = Instant::now();
        let locked = probe.lock(&free(i)).await;
        let unlocked = probe.unlock(&free(i)).await;
        slowest = slowest.max(started.elapsed());
        // A stall past the validity lets the probe's own entry expire
        // before its unlock comes (that unlock finds nothing), and the
        // server then closed the probe's connection, which held nothing:
        // noted, not counted as an answer.
        if locked != Ok(true) || unlocked.is_err() {
            failed.push((locked, unlocked));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        i += 1;
    }
    talking.store(false, Ordering::Relaxed);
    let _ = chatter.await;
    eprintln!(
        "slowest probe {slowest:?}; {} of {i} failed, first {:?}",
        failed.len(),
        failed.first()
    );
    drop(server);
    assert!(
        slowest < crate::STALL_BAR,
        "while {SILENT} connections whose one lock lapsed were checked for idleness, with \
         {} lapsed charges in the ledger (taken with the ordinary token within its limits), a \
         lock and unlock of a free name answered after {slowest:?}: each idle check walked \
         every charge of the server under the ledger's mutex ({} of its {i} rounds failed, the \
         first with {:?})",
        FILLERS * LOCKS,
        failed.len(),
        failed.first()
    );
}
