//! Randomized mutual-exclusion check: many clients take mixed read, write
//! and multi-resource locks, hold them across awaits, and a shared checker
//! records every overlap that the locks should have prevented.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use quorum_lock::{Dsync, RetryPolicy};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::{sleep, timeout};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// What the lock holders are doing right now, per resource: (writers, readers).
#[derive(Default)]
struct Checker {
    inside: Mutex<HashMap<&'static str, (usize, usize)>>,
    violations: Mutex<Vec<String>>,
    writes: AtomicUsize,
    reads: AtomicUsize,
    multi: AtomicUsize,
}

impl Checker {
    fn enter(&self, names: &[&'static str], write: bool, who: &str) {
        let mut inside = self.inside.lock().unwrap();
        for name in names {
            let (writers, readers) = inside.entry(name).or_default();
            if *writers > 0 || (write && *readers > 0) {
                self.violations.lock().unwrap().push(format!(
                    "{who} entered {name} (write = {write}) beside {writers} writers, {readers} readers"
                ));
            }
            *(if write { writers } else { readers }) += 1;
        }
        let kind = if write { &self.writes } else { &self.reads };
        kind.fetch_add(1, Ordering::SeqCst);
        if names.len() > 1 {
            self.multi.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, names: &[&'static str], write: bool) {
        let mut inside = self.inside.lock().unwrap();
        for name in names {
            let (writers, readers) = inside.get_mut(name).expect("left without entering");
            *(if write { writers } else { readers }) -= 1;
        }
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    fn summary(&self) -> String {
        let [w, r, m] = [&self.writes, &self.reads, &self.multi].map(|c| c.load(Ordering::SeqCst));
        format!("{w} writes, {r} reads, {m} multi-resource")
    }
}

fn pick_names(rng: &mut SmallRng) -> Vec<&'static str> {
    let mut names: Vec<_> = (0..rng.random_range(1..=2))
        .map(|_| NAMES[rng.random_range(0..NAMES.len())])
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Holds the guard (whichever kind) until the end of the scope; the checker
/// is told we left before the release starts, so a late release only makes
/// the check stricter.
async fn one_op(ds: &Dsync, rng: &mut SmallRng, checker: &Checker, who: &str) {
    let names = pick_names(rng);
    let m = ds.rw_mutex(names.iter().copied()).unwrap();
    let write = rng.random_bool(0.5);
    let patience = Duration::from_millis(rng.random_range(0..100));
    let guard: Option<Box<dyn Send>> = match (write, rng.random_range(0..3)) {
        (true, 0) => m.lock().await.ok().map(|g| Box::new(g) as _),
        (true, 1) => m.try_lock().await.ok().map(|g| Box::new(g) as _),
        (true, _) => m
            .lock_timeout(patience)
            .await
            .ok()
            .map(|g| Box::new(g) as _),
        (false, 0) => m.read().await.ok().map(|g| Box::new(g) as _),
        (false, 1) => m.try_read().await.ok().map(|g| Box::new(g) as _),
        (false, _) => m
            .read_timeout(patience)
            .await
            .ok()
            .map(|g| Box::new(g) as _),
    };
    let Some(guard) = guard else { return };
    checker.enter(&names, write, who);
    sleep(Duration::from_millis(rng.random_range(0..20))).await;
    checker.leave(&names, write);
    drop(guard);
}

async fn worker(ds: Dsync, seed: u64, id: usize, checker: Arc<Checker>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let who = format!("worker {id}");
    for _ in 0..200 {
        one_op(&ds, &mut rng, &checker, &who).await;
        sleep(Duration::from_millis(rng.random_range(0..5))).await;
    }
}

/// Runs 16 workers, worker `i` locking through `clients[i % len]`, while the
/// links to the nodes slow down and node 0 occasionally fails.
async fn run(clients: &[Dsync], links: &[Arc<FaultyLocker>], seed: u64) -> Arc<Checker> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let checker = Arc::new(Checker::default());
    let workers: Vec<_> = (0..16)
        .map(|i| {
            let ds = clients[i % clients.len()].clone();
            tokio::spawn(worker(ds, rng.random(), i, checker.clone()))
        })
        .collect();
    let chaos = async {
        for _ in 0..1000 {
            let link = &links[rng.random_range(0..links.len())];
            let wait = Duration::from_millis(rng.random_range(0..10));
            link.set(if rng.random_bool(0.5) {
                Behaviour::Delay(wait)
            } else {
                Behaviour::SlowReply(wait)
            });
            // Only node 0 ever fails, so a quorum always remains.
            let fail = rng.random_bool(0.05);
            links[0].set(if fail {
                Behaviour::Fail
            } else {
                Behaviour::Healthy
            });
            sleep(Duration::from_millis(rng.random_range(1..50))).await;
        }
    };
    let all = futures::future::join(futures::future::join_all(workers), chaos);
    let (results, ()) = timeout(Duration::from_secs(3600), all)
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: workers stuck"));
    for r in results {
        r.unwrap_or_else(|e| panic!("seed {seed}: worker panicked: {e}"));
    }
    links.iter().for_each(|l| l.set(Behaviour::Healthy));
    checker
}

#[tokio::test(start_paused = true)]
async fn no_writer_ever_overlaps_another_holder() {
    for seed in 0..5u64 {
        let c = faulty_cluster(5, seed);
        let checker = run(std::slice::from_ref(&c.ds), &c.faults, seed).await;
        let ctx = format!("seed {seed} ({})", checker.summary());
        assert_eq!(checker.violations(), Vec::<String>::new(), "{ctx}");
        for counter in [&checker.writes, &checker.reads, &checker.multi] {
            assert!(
                counter.load(Ordering::SeqCst) > 50,
                "{ctx}: too little progress"
            );
        }
        assert_no_leaks(&c.nodes, &ctx).await;
    }
}

/// The same workload over two clusters that share no node has no mutual
/// exclusion at all; the checker must notice, or the test above proves nothing.
#[tokio::test(start_paused = true)]
async fn the_checker_catches_clients_that_do_not_share_lockers() {
    let seed = 7;
    let (left, right) = (faulty_cluster(5, seed), faulty_cluster(5, seed + 1));
    let links: Vec<_> = left.faults.iter().chain(&right.faults).cloned().collect();
    let checker = run(&[left.ds, right.ds], &links, seed).await;
    assert!(
        !checker.violations().is_empty(),
        "seed {seed}: overlaps went unnoticed ({})",
        checker.summary()
    );
}

/// Real threads, real time: the same property under true parallelism. Holds
/// only across yields, so nothing here depends on how long anything takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_overlap_on_a_multi_threaded_runtime() {
    let nodes = nodes(5);
    let fast = RetryPolicy {
        initial: Duration::from_micros(100),
        max: Duration::from_millis(2),
    };
    let ds = Dsync::builder(as_lockers(&nodes))
        .retry(fast)
        .build()
        .unwrap();
    let checker = Arc::new(Checker::default());
    let workers: Vec<_> = (0..8u64)
        .map(|seed| {
            let (ds, checker) = (ds.clone(), checker.clone());
            tokio::spawn(async move {
                let mut rng = SmallRng::seed_from_u64(seed);
                for _ in 0..100 {
                    let names = pick_names(&mut rng);
                    let m = ds.rw_mutex(names.iter().copied()).unwrap();
                    let write = rng.random_bool(0.5);
                    let guard: Box<dyn Send> = if write {
                        Box::new(m.lock().await.unwrap())
                    } else {
                        Box::new(m.read().await.unwrap())
                    };
                    checker.enter(&names, write, &format!("thread worker {seed}"));
                    for _ in 0..rng.random_range(0..4) {
                        tokio::task::yield_now().await;
                    }
                    checker.leave(&names, write);
                    drop(guard);
                }
            })
        })
        .collect();
    for w in workers {
        timeout(Duration::from_secs(60), w).await.unwrap().unwrap();
    }
    assert_eq!(
        checker.violations(),
        Vec::<String>::new(),
        "{}",
        checker.summary()
    );
    // Dropped guards release on spawned tasks; give them a bounded while.
    for _ in 0..500 {
        if leftovers(&nodes).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(leftovers(&nodes).is_empty(), "{:#?}", leftovers(&nodes));
}
