//! Unit tests of the history checker.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{advance, Instant};

use super::{EventKind, History};
use crate::LockMode::{self, Read, Write};

type Key = (Instant, u64);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `(millis, holder, Some((resources, mode)) for an acquisition, lost?)`.
type Row<'a> = (u64, &'a str, Option<(&'a [&'a str], LockMode)>, bool);

/// Builds a history from rows, recorded in order.
fn history(rows: &[Row<'_>]) -> (History, Instant) {
    let t0 = Instant::now();
    let h = History::new();
    for &(at, holder, acquired, lost) in rows {
        let kind = match acquired {
            Some((resources, mode)) => EventKind::Acquired {
                resources: resources.iter().map(|r| r.to_string()).collect(),
                mode,
            },
            None if lost => EventKind::LostSignalled,
            None => EventKind::Released,
        };
        h.record_at(t0 + ms(at), holder, kind);
    }
    (h, t0)
}

fn acq<'a>(at: u64, who: &'a str, res: &'a [&'a str], mode: LockMode) -> Row<'a> {
    (at, who, Some((res, mode)), false)
}

fn rel(at: u64, who: &str) -> Row<'_> {
    (at, who, None, false)
}

fn lost(at: u64, who: &str) -> Row<'_> {
    (at, who, None, true)
}

#[test]
fn turns_readers_and_disjoint_resources_pass() {
    let (h, _) = history(&[
        acq(0, "w1", &["x"], Write),
        rel(10, "w1"),
        acq(10, "r1", &["x"], Read),
        acq(12, "r2", &["x"], Read),
        acq(13, "w2", &["y"], Write),
        rel(20, "r1"),
        rel(20, "r1"), // a second release changes nothing
        rel(25, "r2"),
        acq(30, "w3", &["x", "y"], Write),
        rel(14, "w2"), // recorded late, ordered by time
    ]);
    assert_eq!(h.check(), Ok(()));
    assert_eq!(h.len(), 10);
}

#[tokio::test(start_paused = true)]
async fn overlapping_writers_are_reported_precisely() {
    let h = History::new();
    let t0 = Instant::now();
    h.acquired("a", ["x", "y"], Write);
    advance(ms(5)).await;
    h.acquired("b", ["z", "y"], Write);
    advance(ms(3)).await;
    h.released("a");
    h.released("b");
    let v = h.check().unwrap_err();
    assert_eq!(
        (v.earlier.holder.as_str(), v.later.holder.as_str()),
        ("a", "b")
    );
    assert_eq!((v.earlier.mode, v.later.mode), (Write, Write));
    assert_eq!(v.resources, ["y"]);
    assert_eq!((v.from, v.until), (t0 + ms(5), Some(t0 + ms(8))));
    assert_eq!(v.earlier.ended, Some(t0 + ms(8)));
    assert_eq!(v.origin, t0);
    assert_eq!(
        v.to_string(),
        "conflicting holders of [\"y\"]: \"a\" (write, acquired at +0ns, released at +8ms) and \
         \"b\" (write, acquired at +5ms, released at +8ms) both believed they held it from +5ms to +8ms"
    );
    let _: &dyn std::error::Error = &v;
}

#[test]
fn a_writer_conflicts_with_readers_both_ways() {
    let (h, t0) = history(&[acq(0, "r", &["x"], Read), acq(4, "w", &["x"], Write)]);
    let v = h.check().unwrap_err();
    assert_eq!((v.earlier.mode, v.later.mode, v.until), (Read, Write, None));
    assert_eq!(v.from, t0 + ms(4));
    assert!(v.to_string().ends_with(
        "never released) both believed they held it from +4ms to the end of the history"
    ));
    let (h, _) = history(&[acq(0, "w", &["x"], Write), acq(4, "r", &["x"], Read)]);
    assert_eq!(h.check().unwrap_err().later.holder, "r");
}

#[test]
fn a_loss_signal_ends_the_belief_before_the_release() {
    let (h, _) = history(&[
        acq(0, "a", &["x"], Write),
        lost(50, "a"),
        acq(60, "b", &["x"], Write),
        rel(70, "a"), // a unlocks late, but it knew since 50
    ]);
    assert_eq!(h.check(), Ok(()));
    let (h, _) = history(&[
        acq(0, "a", &["x"], Write),
        acq(60, "b", &["x"], Write),
        lost(70, "a"),
    ]);
    let v = h.check().unwrap_err();
    assert!(v.earlier.lost && !v.later.lost);
    assert!(v.to_string().contains("told it was lost at +70ms"), "{v}");
}

#[test]
fn equal_instants_are_ordered_by_recording() {
    let (h, _) = history(&[
        acq(0, "a", &["x"], Write),
        rel(5, "a"),
        acq(5, "b", &["x"], Write),
    ]);
    assert_eq!(h.check(), Ok(()));
    let (h, t0) = history(&[
        acq(0, "a", &["x"], Write),
        acq(5, "b", &["x"], Write),
        rel(5, "a"),
    ]);
    let v = h.check().unwrap_err();
    assert_eq!((v.from, v.until), (t0 + ms(5), Some(t0 + ms(5))));
}

#[test]
fn a_holder_never_conflicts_with_itself_and_the_earliest_overlap_wins() {
    let (h, _) = history(&[
        acq(0, "a", &["x"], Write),
        acq(1, "a", &["x"], Read),
        rel(2, "a"),
        acq(3, "b", &["x"], Write),
        acq(9, "c", &["y"], Write),
        acq(10, "d", &["y"], Write),
        acq(11, "e", &["x"], Read),
    ]);
    let v = h.check().unwrap_err();
    assert_eq!(
        (v.earlier.holder.as_str(), v.later.holder.as_str()),
        ("c", "d")
    );
}

/// A random safe history of `ops` turns on four resources: readers share,
/// writers wait for everyone, starts often coincide with ends (the tie
/// rule), every holder is told of a loss and some also unlock late.
fn random_history(seed: u64, ops: usize) -> (History, Instant) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let t0 = Instant::now();
    let h = History::new();
    let mut free_at = [0u64; 4];
    let mut write_free_at = [0u64; 4];
    for i in 0..ops {
        let r = rng.random_range(0..4usize);
        let mode = if rng.random_bool(0.3) { Write } else { Read };
        let ready = if mode == Write {
            free_at[r]
        } else {
            write_free_at[r]
        };
        let start = ready + rng.random_range(0..3);
        let end = start + rng.random_range(1..10);
        let who = format!("h{i}");
        let resources = vec![format!("r{r}")];
        h.record_at(
            t0 + ms(start),
            who.as_str(),
            EventKind::Acquired { resources, mode },
        );
        h.record_at(t0 + ms(end), who.as_str(), EventKind::LostSignalled);
        if rng.random_bool(0.2) {
            h.record_at(t0 + ms(end + 50), who.as_str(), EventKind::Released);
        }
        free_at[r] = free_at[r].max(end);
        if mode == Write {
            write_free_at[r] = end;
        }
    }
    (h, t0)
}

#[test]
fn two_hundred_random_safe_histories_pass_and_an_intruder_fails() {
    for seed in 0..200 {
        let (h, t0) = random_history(seed, 1000);
        assert!(h.len() >= 2000);
        assert_eq!(h.check(), Ok(()), "seed {seed}");
        let end = h.events().iter().map(|e| e.at).max().unwrap();
        let resources = vec!["r0".to_string()];
        h.record_at(
            t0,
            "intruder",
            EventKind::Acquired {
                resources,
                mode: Write,
            },
        );
        h.record_at(end, "intruder", EventKind::Released);
        let v = h.check().unwrap_err();
        assert!(
            [&v.earlier.holder, &v.later.holder].contains(&&"intruder".to_string()),
            "{v}"
        );
        assert_eq!(v.resources, ["r0"]);
    }
}

/// The first conflict by brute force over every pair of belief intervals:
/// the key of the later acquisition, or `None`.
fn brute_force_first(events: &[super::Event]) -> Option<Key> {
    let mut sorted: Vec<&super::Event> = events.iter().collect();
    sorted.sort_by_key(|e| (e.at, e.seq));
    let mut spans = Vec::new();
    for (i, e) in sorted.iter().enumerate() {
        if let EventKind::Acquired { resources, mode } = &e.kind {
            let end = sorted[i..]
                .iter()
                .find(|x| x.holder == e.holder && !matches!(x.kind, EventKind::Acquired { .. }))
                .map(|x| (x.at, x.seq));
            spans.push((e, resources, *mode, (e.at, e.seq), end));
        }
    }
    let mut first = None;
    for a in &spans {
        for b in &spans {
            let shared = a.1.iter().any(|r| b.1.contains(r));
            let conflict = a.2 == Write || b.2 == Write;
            let overlap = a.3 < b.3 && a.4.is_none_or(|end| end > b.3);
            if a.0.holder != b.0.holder && shared && conflict && overlap {
                first = Some(first.map_or(b.3, |f: Key| f.min(b.3)));
            }
        }
    }
    first
}

#[test]
fn the_sweep_agrees_with_brute_force_on_random_unsafe_histories() {
    let mut violations = 0;
    for seed in 0..300 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let t0 = Instant::now();
        let h = History::new();
        for _ in 0..20 {
            let who = format!("h{}", rng.random_range(0..8));
            let at = t0 + ms(rng.random_range(0..40));
            let kind = match rng.random_range(0..6) {
                0 | 1 => {
                    let n = rng.random_range(1..3);
                    let resources = (0..n)
                        .map(|_| format!("r{}", rng.random_range(0..6)))
                        .collect();
                    let mode = if rng.random_bool(0.3) { Write } else { Read };
                    EventKind::Acquired { resources, mode }
                }
                2 => EventKind::LostSignalled,
                _ => EventKind::Released,
            };
            h.record_at(at, who, kind);
        }
        let expected = brute_force_first(&h.events());
        let got = h.check().err().map(|v| (v.later.acquired, v.later.seq));
        assert_eq!(got, expected, "seed {seed}");
        violations += usize::from(got.is_some());
    }
    assert!(
        (30..270).contains(&violations),
        "{violations} of 300 unsafe"
    );
}

#[tokio::test(start_paused = true)]
async fn fencing_tokens_must_grow_between_conflicting_holders() {
    use std::time::Duration;
    let h = History::new();
    h.acquired("w1", ["x"], LockMode::Write);
    h.fenced("w1", 10);
    h.released("w1");
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Readers together: their tokens may come in any order.
    h.acquired("r1", ["x"], LockMode::Read);
    h.fenced("r1", 12);
    h.acquired("r2", ["x"], LockMode::Read);
    h.fenced("r2", 11);
    h.released("r1");
    h.released("r2");
    // A holder without a token is skipped.
    h.acquired("w2", ["x"], LockMode::Write);
    h.released("w2");
    h.acquired("w3", ["x", "y"], LockMode::Write);
    h.fenced("w3", 13);
    h.released("w3");
    assert_eq!(h.check_fencing(), Ok(()));
    // A writer whose token is not above an earlier reader's breaks it.
    h.acquired("w4", ["y", "x"], LockMode::Write);
    h.fenced("w4", 12);
    h.released("w4");
    let v = h.check_fencing().unwrap_err();
    assert_eq!((v.earlier.as_str(), v.later.as_str()), ("w3", "w4"));
    assert_eq!((v.earlier_token, v.later_token), (13, 12));
    assert!(v.to_string().contains("did not grow"));
}
