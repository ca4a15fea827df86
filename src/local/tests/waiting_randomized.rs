//! Randomized waiting on one `LocalLocker`: seeded runs of waits (tickets
//! sometimes reused, modes and names changing), plain locks, unlocks,
//! places left and admin forces by name. After every call: no two
//! conflicting holders; no uid released or forced open holds a new entry
//! or is pushed a grant; and no waiter whose every line lets it in is left waiting for
//! its own re-check (a line a place leaves, or stops blocking, moves on at
//! once), nor, when only places of released or forced uids keep it out
//! (a line drops them as it moves on, but one that has not moved may keep
//! them), after its re-check. Found, before their fixes: a place moved back or turned from
//! write to read by its waiter's newer request, and one waiter's two
//! requests on other names freed together, each left a waiter waiting;
//! a released uid's place on a name its unlock did not cover was granted;
//! a waiter behind a released uid's place on a free name was not let in
//! by its re-check.
//! Seeds: `QUORUM_LOCK_WAITING_SEEDS` (2,000 by default); a failure prints
//! its seed and the calls that led to it.

use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on;

use super::args;
use super::pushed::{long_lived, Grants};
use crate::{LockMode, NetLocker, Ticket, WaitArgs, Wake};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[test]
fn a_waiter_every_line_lets_in_is_granted_at_once_and_released_or_forced_uids_get_nothing() {
    let seeds: u64 = std::env::var("QUORUM_LOCK_WAITING_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    for seed in 1..=seeds {
        run(seed);
    }
}

fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1);
    let l = long_lived();
    let grants = Arc::new(Grants::default());
    // uid -> (names, mode, ticket)
    let mut last: Vec<Option<(Vec<&str>, LockMode, u64)>> = vec![None; 7];
    let mut next_ticket = 10;
    let mut released = [false; 7];
    let mut forced = [false; 7];
    let mut kept: Vec<Vec<String>> = vec![Vec::new(); 7];
    let mut log = Vec::new();
    for _ in 0..70 {
        let u = rng.below(7) as usize;
        let uid = format!("U{u}");
        let mut names: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|_| rng.below(3) == 0)
            .collect();
        if names.is_empty() {
            names.push(NAMES[rng.below(4) as usize]);
        }
        let mode = if rng.below(2) == 0 {
            LockMode::Read
        } else {
            LockMode::Write
        };
        let op = rng.below(11);
        let line = match op {
            0..=4 => {
                let ticket = match &last[u] {
                    Some((_, _, t)) if rng.below(2) == 0 => *t,
                    _ => {
                        next_ticket += 1;
                        next_ticket
                    }
                };
                let wait = WaitArgs {
                    ticket: Ticket {
                        at: ticket,
                        tiebreak: 0,
                    },
                    place_ttl: Duration::from_secs(600),
                    wake: Some(Wake::new(grants.clone(), 0)),
                };
                let r = block_on(l.lock_wait(&args(&uid, &names), mode, &wait));
                last[u] = (r.as_ref().ok() == Some(&crate::WaitReply::Queued))
                    .then(|| (names.clone(), mode, ticket));
                format!("wait {uid} {names:?} {mode:?} t{ticket} -> {r:?}")
            }
            5 | 6 => {
                let r = match mode {
                    LockMode::Write => block_on(l.lock(&args(&uid, &names))),
                    LockMode::Read => block_on(l.rlock(&args(&uid, &names))),
                };
                format!("plain {uid} {names:?} {mode:?} -> {r:?}")
            }
            7 | 8 => {
                last[u] = None;
                released[u] = true;
                let r = match mode {
                    LockMode::Write => block_on(l.unlock(&args(&uid, &names))),
                    LockMode::Read => block_on(l.runlock(&args(&uid, &names))),
                };
                kept[u] = held_by(&l, &uid);
                format!("unlock {uid} {names:?} {mode:?} -> {r:?}")
            }
            10 => {
                let forced_args = crate::LockArgs {
                    uid: "".into(),
                    ..args("x", &names)
                };
                let cleared = l.force_names(&forced_args);
                if let Ok(c) = &cleared {
                    for uid in c {
                        let w: usize = uid[1..].parse().unwrap();
                        last[w] = None;
                        released[w] = true;
                        forced[w] = true;
                        kept[w] = held_by(&l, uid);
                    }
                }
                format!("force {names:?} -> {cleared:?}")
            }
            _ => {
                let r = l.leave_queue(&args(&uid, &names));
                format!("leave {uid} {names:?} -> {r:?}")
            }
        };
        log.push(line);
        // Safety: one writer alone; a uid released or forced holds nothing
        // it did not hold then and gets no push.
        let snap = l.snapshot();
        for n in NAMES {
            let on: Vec<_> = snap.iter().filter(|e| e.resource == n).collect();
            if on.iter().any(|e| e.mode == LockMode::Write) && on.len() > 1 {
                panic!(
                    "seed {seed}: conflicting holders on {n}: {on:?}\n{}",
                    log.join("\n")
                );
            }
        }
        let ended = |w: usize| if forced[w] { "forced" } else { "released" };
        for (w, r) in released.iter().enumerate() {
            let uid = format!("U{w}");
            if *r
                && snap
                    .iter()
                    .any(|e| e.uid == uid && !kept[w].contains(&e.resource))
            {
                panic!("seed {seed}: {} {uid} holds\n{}", ended(w), log.join("\n"));
            }
        }
        let pushes = std::mem::take(&mut *grants.0.lock().unwrap());
        for uid in &pushes {
            let w: usize = uid[1..].parse().unwrap();
            if released[w] {
                panic!(
                    "seed {seed}: {} {uid} granted\n{}",
                    ended(w),
                    log.join("\n")
                );
            }
        }
        // Liveness: a waiter whose every line lets it in is granted at once;
        // one kept out only by places of uids released or forced here
        // (which a line drops as it moves on, but which may stand on a line
        // that has not moved) at the latest when it asks again.
        let now = tokio::time::Instant::now();
        for w in 0..last.len() {
            let Some((names, mode, ticket)) = last[w].clone() else {
                continue;
            };
            if released[w] {
                continue;
            }
            let uid = format!("U{w}");
            let names_s: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let ticket_of = Ticket {
                at: ticket,
                tiebreak: 0,
            };
            let stuck = |forced: &dyn Fn(&str) -> bool| {
                l.shards.with(&names_s, |set| {
                    names_s.iter().enumerate().all(|(pos, r)| {
                        let shard = set.shard(pos);
                        shard.queued_any(r, &uid)
                            && !shard.holds_any(r, &uid)
                            && shard.in_line(r, &uid, mode, Some(ticket_of), now, forced)
                    })
                })
            };
            let holders = || -> Vec<_> {
                l.snapshot()
                    .into_iter()
                    .map(|e| (e.resource, e.uid, e.mode))
                    .collect()
            };
            if stuck(&|_| false) {
                panic!(
                    "seed {seed}: {uid} {names:?} {mode:?} t{ticket} left waiting though every line lets it in\n{}\nholders {:?}",
                    log.join("\n"),
                    holders()
                );
            }
            if stuck(&|other| l.was_released(other, now)) {
                let wait = WaitArgs {
                    ticket: ticket_of,
                    place_ttl: Duration::from_secs(600),
                    wake: Some(Wake::new(grants.clone(), 0)),
                };
                let r = block_on(l.lock_wait(&args(&uid, &names), mode, &wait));
                log.push(format!(
                    "re-check {uid} {names:?} {mode:?} t{ticket} -> {r:?}"
                ));
                let snap = l.snapshot();
                let holds_all = names
                    .iter()
                    .all(|n| snap.iter().any(|e| e.resource == *n && e.uid == uid));
                if !holds_all {
                    panic!(
                        "seed {seed}: {uid} {names:?} {mode:?} t{ticket} kept waiting by released \
                         uids' places after asking again ({r:?})\n{}\nholders {:?}",
                        log.join("\n"),
                        holders()
                    );
                }
                // The grants its re-check pushed (to it, or to those its
                // place let in), checked now: a uid released by the next
                // call may rightly have been granted before it.
                for pushed in std::mem::take(&mut *grants.0.lock().unwrap()) {
                    let v: usize = pushed[1..].parse().unwrap();
                    if released[v] {
                        panic!(
                            "seed {seed}: {} {pushed} granted by a re-check\n{}",
                            ended(v),
                            log.join("\n")
                        );
                    }
                }
                last[w] = None;
            }
        }
    }
}

/// The names `uid` holds now.
fn held_by(l: &crate::LocalLocker, uid: &str) -> Vec<String> {
    l.snapshot()
        .into_iter()
        .filter(|e| *e.uid == *uid)
        .map(|e| e.resource)
        .collect()
}
