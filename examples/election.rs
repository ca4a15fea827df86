//! Three candidates elect a leader on an in-process three-node cluster
//! while an observer prints every change.
//!
//! Run with `cargo run --release --example election`.
//!
//! 1. Three candidates campaign at once; they lead one after another, in
//!    the order they lined up, each for a few rounds of "work" stamped with
//!    its term.
//! 2. The leader proclaims a new value halfway through its term; the
//!    observer sees it.
//! 3. Candidates 0 and 2 resign (waiting for a quorum to confirm);
//!    candidate 1 drops its leadership, which is released in the
//!    background: the next candidate is granted as soon as it lands.
//!
//! The example checks what it prints: terms strictly grow, no two
//! leaderships overlap, the observer saw every leader and ends with "no
//! leader", and every node's lock table is empty at the end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorum_lock::{Dsync, Leader, LocalLocker, NetLocker};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CANDIDATES: usize = 3;

/// One leadership as the candidate saw it.
#[derive(Debug, Clone)]
struct Term {
    candidate: usize,
    term: u64,
    began: Instant,
    ended: Instant,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let nodes: Vec<Arc<LocalLocker>> = (1..=3)
        .map(|i| Arc::new(LocalLocker::named(format!("node-{i}"))))
        .collect();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();

    // The observer: one line per change, until it has seen every leader
    // come and go.
    let observing = Dsync::builder(lockers.clone()).owner("observer").build()?;
    let mut observer = observing.election("scheduler")?.observe()?;
    let seen: Arc<Mutex<Vec<Option<Leader>>>> = Arc::default();
    let log = seen.clone();
    let watching = tokio::spawn(async move {
        while let Some(change) = observer.recv().await {
            match &change {
                Some(leader) => println!("observer: leader is {leader}"),
                None => println!("observer: no leader"),
            }
            let mut log = log.lock().unwrap();
            log.push(change);
            let mut terms: Vec<u64> = log.iter().flatten().map(|l| l.term).collect();
            terms.dedup();
            if terms.len() == CANDIDATES && log.last() == Some(&None) {
                return;
            }
        }
    });

    let terms: Arc<Mutex<Vec<Term>>> = Arc::default();
    let mut candidates = Vec::new();
    for candidate in 0..CANDIDATES {
        let ds = Dsync::builder(lockers.clone())
            .owner(format!("candidate-{candidate}"))
            .build()?;
        let terms = terms.clone();
        candidates.push(tokio::spawn(async move {
            let election = ds.election("scheduler")?;
            let value = format!("candidate-{candidate}");
            let mut leading = election.campaign(value.as_bytes()).await?;
            let began = Instant::now();
            let term = leading.term();
            println!("candidate-{candidate}: leading in term {term}");
            for round in 0..4 {
                if leading.is_lost() {
                    break;
                }
                if round == 2 {
                    leading
                        .proclaim(format!("{value} (halfway)").as_bytes())
                        .await?;
                }
                // ... the singleton work, stamped with `term` ...
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let ended = Instant::now();
            match candidate % 2 {
                0 => leading.resign().await?,
                _ => drop(leading),
            }
            // A dropped leadership is released in the background: wait for
            // it, as a client about to go away should.
            ds.finish_releases(Duration::from_secs(2)).await?;
            println!("candidate-{candidate}: stepped down after term {term}");
            terms.lock().unwrap().push(Term {
                candidate,
                term,
                began,
                ended,
            });
            Ok::<(), quorum_lock::Error>(())
        }));
        // Line up in a known order.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for c in candidates {
        c.await??;
    }
    tokio::time::timeout(Duration::from_secs(10), watching).await??;

    let mut terms = terms.lock().unwrap().clone();
    terms.sort_by_key(|t| t.began);
    let order: Vec<usize> = terms.iter().map(|t| t.candidate).collect();
    println!("led in order {order:?}");
    assert_eq!(order, [0, 1, 2], "first come, first served");
    for pair in terms.windows(2) {
        assert!(pair[1].term > pair[0].term, "terms strictly grow");
        assert!(pair[1].began >= pair[0].ended, "leaderships never overlap");
    }
    let seen = seen.lock().unwrap().clone();
    for t in &terms {
        assert!(
            seen.iter().flatten().any(|l| l.term == t.term),
            "the observer saw term {}",
            t.term
        );
    }
    assert_eq!(seen.last(), Some(&None), "the observer ends with no leader");
    assert!(
        nodes.iter().all(|n| n.snapshot().is_empty()),
        "nothing left"
    );
    println!("ok: one leader at a time, terms grew, the observer saw every change");
    Ok(())
}
