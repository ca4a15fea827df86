#![cfg(feature = "testing")]
//! Restarts, quarantines and fencing clocks, where each once broke a
//! guarantee the README states: a quarantine shorter than the validity is
//! raised to it; the fencing clock tolerance is one constant
//! (`FENCE_CLOCK_TOLERANCE`) for every locker, and a holder whose floor is
//! refused as ahead asks again as the clocks catch up; a restarted locker
//! draws no token for `FENCE_QUARANTINE` even without a quarantine; every
//! `LocalLocker` of a process reads one anchored clock.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::{FaultyLocker, TestCluster};
use quorum_lock::{Dsync, Error, Lease, LocalLocker, LockArgs, LockMode, LockerConfig, NetLocker};
use tokio::time::sleep;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn args(uid: &str, names: &[&str]) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: names
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .into(),
        owner: "attacker".into(),
        source: "review".into(),
        quorum: 1,
    }
}

fn client(lockers: Vec<Arc<dyn NetLocker>>, owner: &str) -> Dsync {
    Dsync::builder(lockers)
        .owner(owner)
        .rng_seed(7)
        .build()
        .unwrap()
}

/// What an ordinary client (client token, no admin rights) can send to one
/// lock server: lock `names` under its own uid, draw a token with the
/// largest floor the server accepts (`floor` computed from the token it
/// just got), and unlock. On release the resource's counter is folded into
/// its shard's floor, so every name of that shard inherits it.
async fn push_floor(node: &LocalLocker, names: &[&str], ahead: impl Fn(u64) -> u64) -> u64 {
    let a = args("evil", names);
    assert!(node.lock(&a).await.unwrap());
    let now = node.fence(&a, LockMode::Write, 0).await.unwrap().unwrap();
    // A floor beyond what the node accepts is refused; the push is then
    // only as far as the node's own token.
    let pushed = match node.fence(&a, LockMode::Write, ahead(now)).await {
        Ok(token) => token.unwrap(),
        Err(err) => {
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            now
        }
    };
    assert!(node.unlock(&a).await.unwrap());
    pushed
}

/// **Break: one client can deny fencing tokens to every other client of a
/// cluster whose servers run different quarantines, with perfect clocks.**
///
/// Rule F bounds a floor by `wall + ε`, with ε a quarter of the *receiving*
/// locker's quarantine. A server run with a longer (more careful)
/// quarantine, here 600 s, so ε = 150 s, accepts from any client a floor up
/// to 150 s ahead of its clock, and records it as the counter (folded into
/// its shard's floor once the client unlocks). The next honest holder of
/// the resource draws there a token 150 s ahead; its fence round, seeing
/// the quorum disagree, asks the other servers (quarantine 60 s, ε = 15 s)
/// to record that token as a floor, and they refuse it as "ahead of the
/// clock". The honest `fencing_token()` fails with `InvalidArgument`
/// (permanent) for as long as the pushed value stays more than 15 s ahead
/// of the clock: 135 s per push, renewable at will, on every resource of
/// the shards the attacker touched (1,000 names cover all 64).
///
/// The assumption table only asks that clocks agree within ε of the
/// smallest quarantine; they agree exactly here. Suggested fix: bound what
/// a locker *records* from a client floor by the smallest ε the cluster may
/// run (a constant, as on Redis), or let the coordinator pick, among the
/// answers, a quorum whose largest token the others accept (with three
/// answers, the two smallest), instead of the first quorum that answered.
#[tokio::test(start_paused = true)]
async fn a_client_pushes_a_long_quarantine_server_beyond_the_others_tolerance() {
    let careful = LockerConfig {
        quarantine: secs(600),
        ..LockerConfig::default()
    };
    let a = Arc::new(LocalLocker::with_config("careful", careful));
    let b = Arc::new(LocalLocker::named("b"));
    let c = Arc::new(LocalLocker::named("c"));
    // A minority down, which the README promises to tolerate; it only
    // fixes which quorum answers first.
    let nodes: Vec<Arc<FaultyLocker>> = [a.clone(), b, c]
        .into_iter()
        .enumerate()
        .map(|(i, l)| Arc::new(FaultyLocker::local(l, i as u64)))
        .collect();
    nodes[2].crash();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();

    let tolerance = quorum_lock::FENCE_CLOCK_TOLERANCE.as_nanos() as u64;
    push_floor(&a, &["r"], |now| now + tolerance).await;

    let honest = client(lockers, "honest");
    let guard = honest.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let token = guard.fencing_token().await;
    assert!(
        token.is_ok(),
        "an honest holder, perfect clocks, every quarantine at least the validity: {token:?}"
    );
}

/// **Break: with `LockerConfig::quarantine = Duration::MAX` (documented as
/// allowed: "Every `Duration` in ... `LockerConfig` may be `Duration::MAX`")
/// any client can end fencing on every resource, for good.**
///
/// ε = quarantine / 4 saturates to `u64::MAX` ns, so the floor check of
/// rule F accepts any floor: a client draws a token with floor `u64::MAX`
/// on a lock of its own, and on unlock the value is folded into the
/// shard's floor. Every later draw on that shard is "at its maximum", an
/// error, on every node the client reached, so no honest holder can get a
/// token until the servers restart, which with that quarantine means never
/// again. (Issue 21's break 4 asked that "a client cannot choose another
/// client's floor without limit".) Suggested fix: cap ε at a constant (the
/// Redis side uses 1 s), or refuse quarantines whose quarter does not fit.
#[tokio::test(start_paused = true)]
async fn with_an_unlimited_quarantine_one_client_ends_fencing_for_everyone() {
    let forever = LockerConfig {
        quarantine: Duration::MAX,
        ..LockerConfig::default()
    };
    let nodes: Vec<Arc<LocalLocker>> = (0..3)
        .map(|i| Arc::new(LocalLocker::with_config(format!("n{i}"), forever)))
        .collect();
    for node in &nodes {
        push_floor(node, &["r"], |_| u64::MAX).await;
    }
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    let honest = client(lockers, "honest");
    let guard = honest.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let token = guard.fencing_token().await;
    assert!(token.is_ok(), "fencing is gone for every holder: {token:?}");
}

/// **Break (tests and simulations): lockers built at different moments of
/// tokio's paused time refuse each other's fencing floors.**
///
/// A `LocalLocker` draws tokens against `epoch_wall + (now - epoch)`:
/// `SystemTime` read once when it is built, plus tokio's clock since. Under
/// `start_paused` the first moves with real time and the second with
/// virtual time, so a locker built after the test advanced 20 s of virtual
/// time runs 20 s behind one built before, more than its 15 s tolerance:
/// every fence round whose first quorum mixes them fails with "the lock
/// servers' wall clocks disagree". Building or replacing a node mid-test
/// (the natural way to simulate a lock server's process restart) is enough;
/// the assumption table talks about servers' wall clocks, which agree here.
/// Suggested fix: anchor every `LocalLocker` of a process on one
/// (`SystemTime`, `Instant`) pair taken once, or document that paused-time
/// tests must build all lockers at the same virtual instant.
#[tokio::test(start_paused = true)]
async fn lockers_built_at_different_paused_instants_refuse_each_others_floors() {
    let early = Arc::new(LocalLocker::named("early"));
    tokio::time::sleep(secs(20)).await;
    let late = Arc::new(LocalLocker::named("late"));
    let down = Arc::new(LocalLocker::named("down"));
    let nodes: Vec<Arc<FaultyLocker>> = [early, late, down]
        .into_iter()
        .enumerate()
        .map(|(i, l)| Arc::new(FaultyLocker::local(l, i as u64)))
        .collect();
    nodes[2].crash();
    let lockers: Vec<Arc<dyn NetLocker>> = nodes
        .iter()
        .map(|n| n.clone() as Arc<dyn NetLocker>)
        .collect();
    let ds = client(lockers, "tester");
    let guard = ds.rw_mutex(["r"]).unwrap().lock().await.unwrap();
    let token = guard.fencing_token().await;
    assert!(token.is_ok(), "{token:?}");
}

/// **Break: two writers both hold a lock (`is_lost()` false for minutes)
/// after one restart of one node, with a `LockerConfig` written the way
/// its own doc example writes one: `validity` raised, `..Default`.**
///
/// `LockerConfig { validity: 600 s, ..LockerConfig::default() }` keeps the
/// default quarantine of 60 s. Nothing refuses that: `LocalLocker` takes
/// it, and `Dsync::build` only checks the lease's validity against the
/// lockers' *validity* (600 s), not against their quarantine. Rule Q's
/// argument needs every grant made before a restart to be distrusted by
/// the end of the quarantine, i.e. quarantine >= lease validity. Here:
/// X holds "r" on nodes 0 and 1 (its request to node 2 was lost); node 0
/// restarts, forgetting X's entry, and X cannot reach it afterwards, so
/// its refreshes cannot re-create the entry. X still trusts its lock for
/// `600 - 60` s after its last confirmed refresh; node 0's quarantine ends
/// after 60 s and Y is granted nodes 0 and 2. Both hold for ~8 minutes.
/// (The same holds for `RedisConfig { validity: .., ..Default }`.)
/// Suggested fix: make the quarantine at least the validity
/// (`LockerConfig`/`RedisConfig` clamp it up or refuse), and/or expose a
/// locker's quarantine to the builder (as `NetLocker::validity` does) and
/// refuse a lease validity longer than it.
#[tokio::test(start_paused = true)]
async fn a_validity_raised_with_the_default_quarantine_lets_two_writers_hold() {
    let config = LockerConfig {
        validity: secs(600),
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(3, 5, config);
    let lease = Lease {
        validity: secs(600),
        refresh_interval: secs(10),
        safety_margin: secs(60),
    };
    let build = |owner: &str| {
        Dsync::builder(cluster.net_lockers())
            .owner(owner)
            .lease(lease)
            .rng_seed(3)
            .build()
            .expect("the builder accepts it")
    };
    let (x, y) = (build("client-x"), build("client-y"));

    cluster.partition("client-x", &[2]).unwrap();
    let gx = x.rw_mutex(["r"]).unwrap().try_lock().await.unwrap();
    cluster.partition("client-x", &[0]).unwrap();
    cluster.restart(&[0]).unwrap();

    tokio::time::sleep(secs(61)).await;
    let gy = y.rw_mutex(["r"]).unwrap().try_lock().await;
    let both = gy.as_ref().is_ok_and(|gy| !gy.is_lost()) && !gx.is_lost();
    assert!(
        !both,
        "two writers hold \"r\" with is_lost() false: X on nodes 1 (+0 forgotten), Y on 0 and 2"
    );
}

/// **Break (minor, an overclaim): with a quarantine of zero a restart
/// repeats fencing tokens between conflicting holders.** The README says
/// tokens grow "across ... lock server restarts, whatever quarantines and
/// validities the servers run with", and `src/quorum/fence.rs` argues from
/// `Q - ε > ε`. With `quarantine` zero (`--no-quarantine`, meant for a
/// first start but often left in a unit file) ε is the 1 ms
/// minimum and `Q - ε > ε` is false; it is also false for any quarantine
/// below 4 ms. A restart then forgets the counters and draws straight from
/// the clock, which need not have passed the last token: here (paused
/// time) the next writer gets exactly the previous writer's token, and a
/// `FencingGate` admits the stale holder's write. In real time a client
/// floor pushed up to 1 ms ahead does the same for a restart within that
/// millisecond. Suggested fix: keep a fencing quarantine of at least
/// `4 × MIN_CLOCK_TOLERANCE` even when grants have none (as Redis keeps
/// `FENCE_QUARANTINE` unless the client says zero), or state the
/// exception in the README.
#[tokio::test(start_paused = true)]
async fn without_quarantine_a_restart_repeats_a_token() {
    let config = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(3, 9, config);
    let ds = client(cluster.net_lockers(), "writer");
    let m = ds.rw_mutex(["r"]).unwrap();
    let first = m.lock().await.unwrap();
    let t1 = first.fencing_token().await.unwrap();
    first.unlock().await.unwrap();
    cluster.restart(&[0, 1, 2]).unwrap();
    let second = m.lock().await.unwrap();
    // Fixed: a restarted locker draws no token for FENCE_QUARANTINE, even
    // without a quarantine for grants.
    assert!(second.fencing_token().await.is_err());
    sleep(quorum_lock::FENCE_QUARANTINE).await;
    let t2 = second.fencing_token().await.unwrap();
    assert!(t2 > t1, "the next writer's token {t2} is not above {t1}");
}
