//! Every operation that gives up or stops short names a settled state of
//! its lockers the way docs/guarantees.md ("Why a wait waits") says, and so
//! all operations agree on it.
//!
//! Each scenario (drawn from a seed) puts every locker in one state that
//! holds for the whole scenario: up, holding the lock for another owner,
//! refusing connections, hanging (calls never answered), or in quarantine
//! after a restart. Then one client runs, one after another, a
//! `lock_timeout` and a `try_lock` of the held name, a semaphore's
//! `acquire_timeout` and `try_acquire`, an election's `campaign_timeout`,
//! `try_campaign` and `leader()`, and a fencing draw when a lock is
//! granted. With nothing changing, what the client knows is what holds,
//! and the expected outcome follows from the quorum rule alone:
//! - granted when lockers enough for a quorum are up;
//! - else held elsewhere (`Timeout`, or `WouldBlock` for one round) when
//!   another owner holds it on some and those with the lockers up make a
//!   quorum, or hold it on more than a grant can do without;
//! - else `Quarantined`, naming exactly the lockers in quarantine, when
//!   they make the quorum with those up or holding;
//! - else `QuorumUnavailable`, naming exactly the lockers down, with
//!   `answered` the others.
//!
//! Three of the four breaks the twentieth review found (a `try_lock` held
//! elsewhere said `QuorumUnavailable`, a fencing draw refused after a
//! restart named its lockers unreachable, `leader()` named lockers in
//! quarantine unreachable) are settled states of this kind.
#![cfg(feature = "testing")]

use std::collections::BTreeSet;
use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Error, LockArgs, LockerConfig, NetLocker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::common;

const SEEDS: u64 = 60;
const HELD: &str = "held";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    /// Up, with `HELD` locked by another owner.
    Held,
    Refusing,
    Hanging,
    Quarantined,
}

/// What an operation should end with.
#[derive(Debug, PartialEq, Eq)]
enum Expected {
    Granted,
    HeldElsewhere,
    Quarantined(BTreeSet<String>),
    Unavailable {
        answered: usize,
        unreachable: BTreeSet<String>,
    },
}

fn names(states: &[State], wanted: &[State]) -> BTreeSet<String> {
    states
        .iter()
        .enumerate()
        .filter(|(_, s)| wanted.contains(s))
        .map(|(i, _)| format!("node-{i}"))
        .collect()
}

/// The quorum rule over settled states; `held_counts` says whether the
/// operation's names are the held one.
fn expected(states: &[State], held_counts: bool) -> Expected {
    let n = states.len();
    let quorum = n / 2 + 1;
    let count = |s: State| states.iter().filter(|x| **x == s).count();
    let (mut up, mut held) = (count(State::Up), count(State::Held));
    if !held_counts {
        up += held;
        held = 0;
    }
    let quarantined = count(State::Quarantined);
    if up >= quorum {
        Expected::Granted
    } else if held > 0 && (up + held >= quorum || held > n - quorum) {
        Expected::HeldElsewhere
    } else if quarantined > 0 && up + held + quarantined >= quorum {
        Expected::Quarantined(names(states, &[State::Quarantined]))
    } else {
        Expected::Unavailable {
            answered: up + held + quarantined,
            unreachable: names(states, &[State::Refusing, State::Hanging]),
        }
    }
}

/// Whether `got` is what `expected` says, for an operation whose held
/// outcome is `held_error` (`Timeout` for a wait, `WouldBlock` for one
/// round).
fn agrees<T>(got: &Result<T, Error>, expected: &Expected, held_error: fn(&Error) -> bool) -> bool {
    match (got, expected) {
        (Ok(_), Expected::Granted) => true,
        (Err(err), Expected::HeldElsewhere) => held_error(err),
        (Err(Error::Quarantined { quarantined, .. }), Expected::Quarantined(want)) => {
            quarantined.iter().cloned().collect::<BTreeSet<_>>() == *want
        }
        (
            Err(Error::QuorumUnavailable {
                answered,
                unreachable,
                ..
            }),
            Expected::Unavailable {
                answered: want_answered,
                unreachable: want,
            },
        ) => {
            answered == want_answered
                && unreachable
                    .iter()
                    .map(|u| u.endpoint.clone())
                    .collect::<BTreeSet<_>>()
                    == *want
        }
        _ => false,
    }
}

fn is_timeout(err: &Error) -> bool {
    matches!(err, Error::Timeout)
}

fn is_would_block(err: &Error) -> bool {
    matches!(err, Error::WouldBlock)
}

fn draw_states(rng: &mut SmallRng) -> Vec<State> {
    let n = rng.random_range(3..=5);
    (0..n)
        .map(|_| match rng.random_range(0..10) {
            0..=2 => State::Up,
            3..=4 => State::Held,
            5..=6 => State::Refusing,
            7 => State::Hanging,
            _ => State::Quarantined,
        })
        .collect()
}

async fn scenario(seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let states = draw_states(&mut rng);
    // A quarantine longer than the scenario: the state holds throughout.
    let config = LockerConfig {
        quarantine: Duration::from_secs(3_600),
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(states.len(), seed, config);
    let other = LockArgs {
        uid: "other-uid".into(),
        resources: vec![HELD.to_owned()].into(),
        owner: "other".into(),
        source: "every_operation_names_a_settled_state".into(),
        quorum: 1,
    };
    for (i, state) in states.iter().enumerate() {
        match state {
            State::Up => {}
            State::Held => {
                assert_eq!(cluster.lockers()[i].lock(&other).await, Ok(true));
            }
            State::Refusing => cluster.set_refuse(true, &[i]).unwrap(),
            State::Hanging => cluster.set_hang(true, &[i]).unwrap(),
            State::Quarantined => cluster.restart(&[i]).unwrap(),
        }
    }
    let h = common::seeded(cluster.net_lockers(), "h", seed);
    let for_lock = expected(&states, true);
    let for_others = expected(&states, false);
    let mut wrong = Vec::new();
    let mut check = |what: &str, ok: bool, got: String, want: &Expected| {
        if !ok {
            wrong.push(format!("{what}: got {got}, expected {want:?}"));
        }
    };
    let deadline = Duration::from_secs(3);

    let mutex = h.rw_mutex([HELD]).unwrap();
    let waited = mutex.lock_timeout(deadline).await;
    if let Ok(guard) = &waited {
        let token = guard.fencing_token().await;
        check(
            "fencing draw of the granted lock",
            token.is_ok(),
            format!("{token:?}"),
            &Expected::Granted,
        );
    }
    let got = waited.map(drop);
    check(
        "lock_timeout",
        agrees(&got, &for_lock, is_timeout),
        format!("{got:?}"),
        &for_lock,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;
    let got = mutex.try_lock().await.map(drop);
    check(
        "try_lock",
        agrees(&got, &for_lock, is_would_block),
        format!("{got:?}"),
        &for_lock,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;

    let semaphore = h.semaphore("pool", 2).unwrap();
    let got = semaphore.acquire_timeout(deadline).await.map(drop);
    check(
        "semaphore acquire_timeout",
        agrees(&got, &for_others, is_timeout),
        format!("{got:?}"),
        &for_others,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;
    let got = semaphore.try_acquire().await.map(drop);
    check(
        "semaphore try_acquire",
        agrees(&got, &for_others, is_would_block),
        format!("{got:?}"),
        &for_others,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;

    let election = h.election("e").unwrap();
    let got = election
        .campaign_timeout(b"v".to_vec(), deadline)
        .await
        .map(drop);
    check(
        "campaign_timeout",
        agrees(&got, &for_others, is_timeout),
        format!("{got:?}"),
        &for_others,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;
    let got = election.try_campaign(b"v".to_vec()).await.map(drop);
    check(
        "try_campaign",
        agrees(&got, &for_others, is_would_block),
        format!("{got:?}"),
        &for_others,
    );
    let _ = h.finish_releases(Duration::from_millis(500)).await;
    let got = election.leader().await.map(drop);
    check(
        "leader()",
        agrees(&got, &for_others, |_| false),
        format!("{got:?}"),
        &for_others,
    );
    if !wrong.is_empty() {
        wrong.insert(0, format!("seed {seed}, lockers {states:?}"));
    }
    wrong
}

#[tokio::test(start_paused = true)]
async fn every_operation_names_a_settled_state_as_the_quorum_rule_does() {
    let first: u64 = std::env::var("SETTLED_STATE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut failures = Vec::new();
    for seed in first..first + SEEDS {
        let wrong = scenario(seed).await;
        if !wrong.is_empty() {
            failures.push(wrong.join("\n  "));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {SEEDS} scenarios named a settled state otherwise than the quorum rule \
         (replay one with SETTLED_STATE_SEED=N):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
