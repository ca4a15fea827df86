//! Fencing tokens: every holder's token is strictly greater than
//! the token of every conflicting holder before it, across releases,
//! expiry, forced unlocks and locker restarts, and a `FencingGate` refuses
//! the late write of a holder that paused past its lease.

use crate::common;

use crate::common::{as_lockers, nodes};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::hooked::{Hooked, Optional};
use quorum_lock::{
    Dsync, Error, FencingGate, LocalLocker, LockArgs, LockMode, NetLocker, StaleToken,
};
use tokio::time::sleep;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn client(lockers: Vec<Arc<dyn NetLocker>>, owner: &str) -> Dsync {
    common::seeded(lockers, owner, 1)
}

/// Takes the lock on `names` in `mode`, draws its token, checks that asking
/// again gives the same token, and releases it.
async fn token_of(ds: &Dsync, names: &[&str], mode: LockMode) -> u64 {
    let m = ds.rw_mutex(names.iter().copied()).unwrap();
    match mode {
        LockMode::Write => {
            let g = m.lock().await.unwrap();
            let t = g.fencing_token().await.unwrap();
            assert_eq!(g.fencing_token().await.unwrap(), t, "one token per guard");
            g.unlock().await.unwrap();
            t
        }
        LockMode::Read => {
            let g = m.read().await.unwrap();
            let t = g.fencing_token().await.unwrap();
            assert_eq!(g.fencing_token().await.unwrap(), t, "one token per guard");
            g.unlock().await.unwrap();
            t
        }
    }
}

#[tokio::test(start_paused = true)]
async fn tokens_strictly_increase_across_holders_of_one_resource() {
    use LockMode::{Read, Write};
    let nodes = nodes(5);
    let ds = client(as_lockers(&nodes), "seq");
    let mut last = 0;
    // Write after write, read after write, write after read, read after read.
    for (step, mode) in [Write, Write, Read, Write, Read, Read, Write]
        .into_iter()
        .enumerate()
    {
        let t = token_of(&ds, &["r"], mode).await;
        assert!(t > last, "step {step} ({mode:?}): {t} after {last}");
        last = t;
    }
}

#[tokio::test(start_paused = true)]
async fn readers_holding_together_are_both_below_the_next_writer() {
    let nodes = nodes(5);
    let ds = client(as_lockers(&nodes), "readers");
    let m = ds.rw_mutex(["r"]).unwrap();
    let w0 = token_of(&ds, &["r"], LockMode::Write).await;
    let (r1, r2) = (m.read().await.unwrap(), m.read().await.unwrap());
    let (t1, t2) = (
        r1.fencing_token().await.unwrap(),
        r2.fencing_token().await.unwrap(),
    );
    assert!(t1 > w0 && t2 > w0, "{t1}, {t2} after {w0}");
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let w1 = token_of(&ds, &["r"], LockMode::Write).await;
    assert!(w1 > t1.max(t2), "{w1} after readers {t1}, {t2}");
}

#[tokio::test(start_paused = true)]
async fn one_token_covers_every_resource_of_a_multi_resource_lock() {
    use LockMode::{Read, Write};
    let nodes = nodes(5);
    let ds = client(as_lockers(&nodes), "multi");
    let a = token_of(&ds, &["a"], Write).await;
    // b's counter runs ahead of a's.
    let mut b = 0;
    for _ in 0..5 {
        b = token_of(&ds, &["b"], Write).await;
    }
    let c = token_of(&ds, &["c"], Read).await;
    let ab = token_of(&ds, &["a", "b"], Write).await;
    assert!(ab > a && ab > b, "{ab} must exceed a's {a} and b's {b}");
    let abc = token_of(&ds, &["a", "b", "c"], Read).await;
    assert!(abc > ab && abc > c, "{abc} after {ab} and {c}");
    // Each resource alone continues above the lock that covered it.
    let a2 = token_of(&ds, &["a"], Write).await;
    let b2 = token_of(&ds, &["b"], Read).await;
    let c2 = token_of(&ds, &["c"], Write).await;
    assert!(
        a2 > abc && b2 > abc && c2 > abc,
        "{a2}, {b2}, {c2} after {abc}"
    );
}

/// Forwards every call to `node`, or none while `cut`: the calls of a
/// holder whose network (or process) stopped.
fn cuttable(node: &Arc<LocalLocker>, cut: Arc<AtomicBool>) -> Arc<dyn NetLocker> {
    Hooked::new(node.clone())
        .cut_while(move |_, _| cut.load(Ordering::SeqCst))
        .lacking(&[
            Optional::Queues,
            Optional::Proclaim,
            Optional::Leader,
            Optional::Locks,
        ])
        .online(true)
        .local(true)
        .shared()
}

/// A client over `nodes` whose every call can be cut with the returned switch.
fn cuttable_client(nodes: &[Arc<LocalLocker>], owner: &str) -> (Dsync, Arc<AtomicBool>) {
    let cut = Arc::new(AtomicBool::new(false));
    let lockers = nodes.iter().map(|n| cuttable(n, cut.clone())).collect();
    (client(lockers, owner), cut)
}

#[tokio::test(start_paused = true)]
async fn tokens_increase_across_expiry() {
    let nodes = nodes(5);
    let validity = nodes[0].config().validity;
    let (a_ds, cut) = cuttable_client(&nodes, "a");
    let b_ds = client(as_lockers(&nodes), "b");
    let a = a_ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let ta = a.fencing_token().await.unwrap();
    cut.store(true, Ordering::SeqCst);
    sleep(validity + secs(1)).await;
    assert!(a.is_lost());
    assert!(
        nodes.iter().all(|n| n.snapshot().is_empty()),
        "A's entries expired"
    );
    assert!(matches!(a.fencing_token().await, Err(Error::LockLost)));
    let tb = token_of(&b_ds, &["r"], LockMode::Write).await;
    assert!(tb > ta, "{tb} after the expired holder's {ta}");
    drop(a);
}

#[tokio::test(start_paused = true)]
async fn tokens_increase_across_force_unlock() {
    let nodes = nodes(5);
    let ds = client(as_lockers(&nodes), "forced");
    let m = ds.rw_mutex(["r"]).unwrap();
    let a = m.lock().await.unwrap();
    let ta = a.fencing_token().await.unwrap();
    // A holder that never drew a token before the force unlock.
    let other = ds.rw_mutex(["s"]).unwrap().lock().await.unwrap();
    assert_eq!(ds.force_unlock(["r", "s"]).await.unwrap(), 5);
    assert!(
        matches!(other.fencing_token().await, Err(Error::LockLost)),
        "no locker holds it any more"
    );
    let b = m.lock().await.unwrap();
    let tb = b.fencing_token().await.unwrap();
    assert!(tb > ta, "{tb} after the forced-open holder's {ta}");
    // A learns at its next refresh that its lock is gone.
    sleep(ds_refresh_interval() + secs(1)).await;
    assert!(a.is_lost());
    assert!(matches!(a.fencing_token().await, Err(Error::LockLost)));
    assert!(!b.is_lost());
    b.unlock().await.unwrap();
    drop((a, other));
}

fn ds_refresh_interval() -> Duration {
    quorum_lock::Lease::default().refresh_interval
}

#[tokio::test(start_paused = true)]
async fn tokens_increase_when_a_majority_of_lockers_restarts() {
    for restarted in [vec![0, 1, 2], vec![2, 3, 4], vec![0, 1, 2, 3, 4]] {
        let nodes = nodes(5);
        let quarantine = nodes[0].config().quarantine;
        let ds = client(as_lockers(&nodes), "restarts");
        let before = token_of(&ds, &["r"], LockMode::Write).await;
        // Run the survivors' counters well ahead: they must still be beaten.
        let mut high = before;
        for _ in 0..10 {
            high = token_of(&ds, &["r"], LockMode::Write).await;
        }
        for &i in &restarted {
            nodes[i].restart();
        }
        sleep(quarantine + secs(1)).await;
        for mode in [LockMode::Write, LockMode::Read] {
            let t = token_of(&ds, &["r"], mode).await;
            assert!(
                t > high,
                "restarted {restarted:?}, {mode:?}: {t} after {high} (the counters forgot it)"
            );
            high = t;
        }
    }
}

/// A holder across the restart of a minority draws its token from the
/// others, larger than the one before; across the restart of a majority it
/// draws none until the quarantine is over (the restarted lockers vouch for
/// nothing), and it is told it lost the lock before then.
#[tokio::test(start_paused = true)]
async fn a_holder_across_restarts_draws_a_larger_token_or_none() {
    for restarted in [2, 3] {
        let nodes = nodes(5);
        let ds = client(as_lockers(&nodes), "kept");
        let before = token_of(&ds, &["r"], LockMode::Write).await;
        let g = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
        for node in &nodes[..restarted] {
            node.restart();
        }
        // The holder's next refresh re-creates its entries in the quarantine.
        sleep(ds_refresh_interval() + secs(1)).await;
        assert!(!g.is_lost());
        match g.fencing_token().await {
            Ok(t) => assert!(restarted < 3 && t > before, "{t} after {before}"),
            // Lockers in quarantine are what keeps the quorum: said so.
            Err(err) => assert!(
                restarted >= 3 && matches!(err, Error::Quarantined { .. }),
                "{restarted} restarted: {err}"
            ),
        }
        if restarted >= 3 {
            g.lost().await;
        }
        drop(g);
    }
}

/// A node that missed a holder's token (it was cut off from that holder)
/// answers a smaller one to the next holder; the next token is still larger,
/// and the lagging node catches up.
#[tokio::test(start_paused = true)]
async fn a_node_that_missed_a_token_does_not_hold_the_next_one_back() {
    let nodes = nodes(5);
    let cut = Arc::new(AtomicBool::new(false));
    // Node 0 comes first in every fan-out, so its answer is always counted.
    let a_lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let cut = if i == 0 {
                cut.clone()
            } else {
                Arc::new(AtomicBool::new(false))
            };
            cuttable(n, cut)
        })
        .collect();
    let a_ds = client(a_lockers, "a");
    let b_ds = client(as_lockers(&nodes), "b");
    let mut last = token_of(&b_ds, &["r"], LockMode::Write).await;
    cut.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        let t = token_of(&a_ds, &["r"], LockMode::Write).await;
        assert!(t > last);
        last = t;
    }
    let probe = LockArgs {
        uid: "probe".into(),
        resources: vec!["r".to_string()].into(),
        owner: "probe".into(),
        source: "test".into(),
        quorum: 1,
    };
    // Node 0's counter lags behind the other nodes'.
    assert!(nodes[0].lock(&probe).await.unwrap());
    let lagging = nodes[0]
        .fence(&probe, LockMode::Write, 0)
        .await
        .unwrap()
        .unwrap();
    assert!(lagging < last, "{lagging} < {last}");
    assert!(nodes[0].unlock(&probe).await.unwrap());
    cut.store(false, Ordering::SeqCst);
    sleep(secs(1)).await;

    let t = token_of(&b_ds, &["r"], LockMode::Write).await;
    assert!(
        t > last,
        "{t} after {last}, with node 0 answering {lagging}"
    );
    // A fresh uid: a locker refuses one it released for a validity.
    let probe = LockArgs {
        uid: "probe-again".into(),
        ..probe
    };
    assert!(nodes[0].lock(&probe).await.unwrap());
    let caught_up = nodes[0]
        .fence(&probe, LockMode::Write, 0)
        .await
        .unwrap()
        .unwrap();
    assert!(
        caught_up > t,
        "node 0 recorded the agreed token: {caught_up} > {t}"
    );
    assert!(nodes[0].unlock(&probe).await.unwrap());
    let next = token_of(&b_ds, &["r"], LockMode::Read).await;
    assert!(next > caught_up);
}

/// Forwards everything except `fence`: a locker of the first protocol
/// generation, which has no fencing counters.
fn no_fence(node: &Arc<LocalLocker>) -> Arc<dyn NetLocker> {
    Hooked::new(node.clone())
        .lacking(&Optional::ALL)
        .named(format!("old({})", node.endpoint()))
        .online(true)
        .local(true)
        .shared()
}

#[tokio::test(start_paused = true)]
async fn lockers_without_fencing_report_unsupported() {
    let nodes = nodes(3);
    let old: Vec<Arc<dyn NetLocker>> = nodes.iter().map(no_fence).collect();
    let ds = client(old, "old");
    let m = ds.rw_mutex(["r"]).unwrap();
    let g = m.lock().await.unwrap();
    match g.fencing_token().await {
        Err(Error::Unsupported { endpoint, what }) => {
            assert!(endpoint.starts_with("old("), "{endpoint}");
            assert!(what.contains("fencing"), "{what}");
        }
        other => panic!("expected Error::Unsupported, got {other:?}"),
    }
    // The lock itself is unaffected.
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
    let r = m.read().await.unwrap();
    assert!(matches!(
        r.fencing_token().await,
        Err(Error::Unsupported { .. })
    ));
    r.unlock().await.unwrap();
}

/// A resource behind a fencing gate: a write is stored only if its token
/// is admitted.
#[derive(Default)]
struct Report {
    gate: FencingGate,
    contents: std::sync::Mutex<Vec<&'static str>>,
}

impl Report {
    fn write(&self, token: u64, value: &'static str) -> Result<(), StaleToken> {
        let mut contents = self.contents.lock().unwrap();
        self.gate.admit(token)?;
        contents.push(value);
        Ok(())
    }

    fn contents(&self) -> Vec<&'static str> {
        self.contents.lock().unwrap().clone()
    }
}

/// A locker that cannot draw tokens counts as one that failed: with one
/// of five, a quorum still answers and the holder gets its token; with
/// three of five, no quorum can and the holder is told fencing is
/// unsupported. Wherever those lockers sit in the list. (Found by these
/// tests as a bug, fixed in 5babaf4: the answer depended on the position.)
#[tokio::test(start_paused = true)]
async fn lockers_without_fencing_count_as_failed_wherever_they_sit() {
    for (old, expect) in [(1, "token"), (3, "unsupported")] {
        let mut outcomes = Vec::new();
        for first in 0..5 {
            let is_old = |i: usize| (i + 5 - first) % 5 < old;
            let lockers: Vec<Arc<dyn NetLocker>> = nodes(5)
                .into_iter()
                .enumerate()
                .map(|(i, n)| {
                    if is_old(i) {
                        no_fence(&n)
                    } else {
                        n as Arc<dyn NetLocker>
                    }
                })
                .collect();
            let ds = client(lockers, "mixed");
            let g = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
            let outcome = match g.fencing_token().await {
                Ok(_) => "token",
                Err(Error::Unsupported { .. }) => "unsupported",
                Err(other) => panic!("{old} lockers without fencing from {first}: {other:?}"),
            };
            outcomes.push(outcome);
            g.unlock().await.unwrap();
        }
        assert_eq!(
            outcomes, [expect; 5],
            "{old} of 5 lockers without fencing, starting at positions 0..5"
        );
    }
}

/// The pattern the crate documents: A gets a token and pauses past its
/// lease; B gets the lock and writes; A's late write is refused.
#[tokio::test(start_paused = true)]
async fn a_fencing_gate_refuses_the_late_write_of_a_paused_holder() {
    let nodes = nodes(5);
    let validity = nodes[0].config().validity;
    let (a_ds, a_paused) = cuttable_client(&nodes, "worker-a");
    let b_ds = client(as_lockers(&nodes), "worker-b");
    let report = Report::default();
    let write = |token: u64, value: &'static str| report.write(token, value);

    let a = a_ds.rw_mutex(["report"]).unwrap().lock().await.unwrap();
    let ta = a.fencing_token().await.unwrap();
    write(ta, "a: first write").unwrap();

    // A stalls (a GC pause, a stopped VM): nothing of it reaches the lockers.
    a_paused.store(true, Ordering::SeqCst);
    sleep(validity + secs(1)).await;

    let b = b_ds.rw_mutex(["report"]).unwrap().lock().await.unwrap();
    let tb = b.fencing_token().await.unwrap();
    assert!(tb > ta);
    write(tb, "b: write").unwrap();

    // A wakes up and carries on with the token it had.
    let late = write(ta, "a: late write").unwrap_err();
    assert_eq!(
        late,
        StaleToken {
            token: ta,
            newest: tb
        }
    );
    assert_eq!(report.contents(), ["a: first write", "b: write"]);
    // B may write again with the same token.
    write(tb, "b: second write").unwrap();
    b.unlock().await.unwrap();
    drop(a);
}

/// Issue #21, break 3: lockers with different quarantines. A locker in its
/// long quarantine used to answer fencing tokens from its clock plus that
/// quarantine; the fence round then wrote that value into the others as a
/// floor, and once those restarted with their shorter quarantine they drew
/// tokens below it. A locker in quarantine draws no token now, and a
/// restarted one draws from its clock.
#[tokio::test(start_paused = true)]
async fn tokens_keep_growing_when_lockers_with_different_quarantines_restart() {
    let config = |quarantine| quorum_lock::LockerConfig {
        validity: secs(5),
        quarantine,
    };
    let nodes: Vec<Arc<LocalLocker>> = [secs(600), secs(5), secs(5)]
        .into_iter()
        .enumerate()
        .map(|(i, q)| Arc::new(LocalLocker::with_config(format!("node-{i}"), config(q))))
        .collect();
    let ds = Dsync::builder(as_lockers(&nodes))
        .owner("mixed")
        .rng_seed(1)
        .lease(quorum_lock::Lease {
            validity: secs(5),
            refresh_interval: secs(1),
            safety_margin: secs(1),
        })
        .build()
        .unwrap();
    nodes[0].restart();
    let first = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    // A refresh reaches node 0 in its quarantine.
    sleep(secs(2)).await;
    let before = first.fencing_token().await.unwrap();
    // The other two crash while the lock is held, and forget its token.
    nodes[1].restart();
    nodes[2].restart();
    drop(first);
    let second = ds
        .rw_mutex(["r"])
        .unwrap()
        .lock_timeout(secs(60))
        .await
        .unwrap();
    let after = second.fencing_token().await.unwrap();
    assert!(after > before, "token {after} drawn after {before}");
    second.unlock().await.unwrap();
}

/// Issue #21, break 4: a client holding one lock sent `u64::MAX` as the
/// floor; the counter saturated and every later holder got the same
/// token. A floor further ahead of the locker's clock than its tolerance is
/// refused now, so no client can push the counters to the end.
#[tokio::test(start_paused = true)]
async fn a_floor_far_ahead_of_the_clock_is_refused_and_tokens_keep_growing() {
    let node = LocalLocker::new();
    let hostile = common::args("hostile", &["r"]);
    assert!(node.lock(&hostile).await.unwrap());
    let err = node
        .fence(&hostile, LockMode::Write, u64::MAX)
        .await
        .expect_err("a floor of u64::MAX was accepted");
    assert!(
        matches!(&err, Error::InvalidArgument(why) if why.contains("ahead of the clock")),
        "{err}"
    );
    let own = node
        .fence(&hostile, LockMode::Write, 0)
        .await
        .unwrap()
        .unwrap();
    assert!(node.unlock(&hostile).await.unwrap());
    let mut last = own;
    for i in 0..3 {
        let args = common::args(&format!("next-{i}"), &["r"]);
        assert!(node.lock(&args).await.unwrap());
        let t = node
            .fence(&args, LockMode::Write, 0)
            .await
            .unwrap()
            .unwrap();
        assert!(t > last && t < u64::MAX, "token {t} after {last}");
        last = t;
        assert!(node.unlock(&args).await.unwrap());
    }
}

/// Issue #21, break 4 without an attacker: a quarantine of `Duration::MAX`
/// used to put the counters at `u64::MAX` after a restart. Such a locker
/// now stays in quarantine and draws no token at all.
#[tokio::test(start_paused = true)]
async fn an_endless_quarantine_draws_no_token_instead_of_a_saturated_one() {
    let node = LocalLocker::with_config(
        "endless",
        quorum_lock::LockerConfig {
            quarantine: Duration::MAX,
            ..quorum_lock::LockerConfig::default()
        },
    );
    // Before any restart it draws tokens, and refuses a floor at the end
    // of the range although a quarter of its quarantine is "forever".
    let held = common::args("held", &["r"]);
    assert!(node.lock(&held).await.unwrap());
    assert!(node.fence(&held, LockMode::Write, u64::MAX).await.is_err());
    assert!(
        node.fence(&held, LockMode::Write, 0)
            .await
            .unwrap()
            .unwrap()
            < u64::MAX
    );
    node.restart();
    sleep(secs(3600)).await;
    let args = common::args("u", &["r"]);
    let err = node.fence(&args, LockMode::Write, 0).await.unwrap_err();
    assert!(err.to_string().contains("refusing new grants"), "{err}");
}
