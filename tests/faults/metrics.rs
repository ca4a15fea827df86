//! Library metrics (feature `metrics`), checked with a recorder of the
//! test's own that keeps every value: each test builds its `Dsync` under a
//! recorder of its own, takes, waits for, loses and releases locks on
//! paused time, and then reads what was recorded.
#![cfg(all(feature = "metrics", feature = "testing"))]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use quorum_lock::metric_names as names;
use quorum_lock::testing::FaultyLocker;
use quorum_lock::{Dsync, Error, Lease, LocalLocker, NetLocker, Timeouts};

/// A recorded value.
#[derive(Debug, Clone)]
enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

/// The storage behind one registered metric.
struct Cell(Mutex<Value>);

impl Cell {
    fn update(&self, f: impl FnOnce(&mut Value)) {
        f(&mut self.0.lock().expect("a cell's lock"));
    }
}

impl CounterFn for Cell {
    fn increment(&self, by: u64) {
        self.update(|v| match v {
            Value::Counter(n) => *n += by,
            other => panic!("counter increment on {other:?}"),
        });
    }
    fn absolute(&self, to: u64) {
        self.update(|v| match v {
            Value::Counter(n) => *n = (*n).max(to),
            other => panic!("counter absolute on {other:?}"),
        });
    }
}

impl GaugeFn for Cell {
    fn increment(&self, by: f64) {
        self.update(|v| match v {
            Value::Gauge(g) => *g += by,
            other => panic!("gauge increment on {other:?}"),
        });
    }
    fn decrement(&self, by: f64) {
        GaugeFn::increment(self, -by);
    }
    fn set(&self, to: f64) {
        self.update(|v| match v {
            Value::Gauge(g) => *g = to,
            other => panic!("gauge set on {other:?}"),
        });
    }
}

impl HistogramFn for Cell {
    fn record(&self, sample: f64) {
        self.update(|v| match v {
            Value::Histogram(samples) => samples.push(sample),
            other => panic!("histogram record on {other:?}"),
        });
    }
}

/// A recorder that keeps every metric it is asked to register, by key:
/// the same key registered twice shares one cell, as with any registry.
#[derive(Default)]
struct Keeping {
    cells: Mutex<Vec<(Key, Arc<Cell>)>>,
}

impl Keeping {
    fn cell(&self, key: &Key, fresh: Value) -> Arc<Cell> {
        let mut cells = self.cells.lock().expect("the registry's lock");
        if let Some((_, cell)) = cells.iter().find(|(k, _)| k == key) {
            return Arc::clone(cell);
        }
        let cell = Arc::new(Cell(Mutex::new(fresh)));
        cells.push((key.clone(), Arc::clone(&cell)));
        cell
    }
}

impl Recorder for Keeping {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key, Value::Counter(0)))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key, Value::Gauge(0.0)))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key, Value::Histogram(Vec::new())))
    }
}

/// One recorded metric: name, labels, value.
struct Recorded {
    name: String,
    labels: Vec<(String, String)>,
    value: Value,
}

/// Everything recorded while `make`'s future ran, and its output. The
/// future runs on a current-thread runtime with paused time, inside a
/// recorder that only this test uses.
fn recorded<F: Future>(make: impl FnOnce() -> F) -> (F::Output, Vec<Recorded>) {
    let recorder = Keeping::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let out = metrics::with_local_recorder(&recorder, || runtime.block_on(make()));
    let cells = recorder.cells.into_inner().expect("the registry's lock");
    let snapshot = cells
        .into_iter()
        .map(|(key, cell)| Recorded {
            name: key.name().to_owned(),
            labels: key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect(),
            value: cell.0.lock().expect("a cell's lock").clone(),
        })
        .collect();
    (out, snapshot)
}

fn matching<'a>(
    all: &'a [Recorded],
    name: &'a str,
    labels: &'a [(&str, &str)],
) -> impl Iterator<Item = &'a Recorded> + 'a {
    all.iter().filter(move |r| {
        r.name == name
            && labels
                .iter()
                .all(|(k, v)| r.labels.iter().any(|(rk, rv)| rk == k && rv == v))
    })
}

/// The sum of the counters `name` whose labels include `labels`.
fn counter(all: &[Recorded], name: &str, labels: &[(&str, &str)]) -> u64 {
    matching(all, name, labels)
        .map(|r| match r.value {
            Value::Counter(n) => n,
            _ => panic!("{name} is not a counter"),
        })
        .sum()
}

/// The samples of the histograms `name` whose labels include `labels`.
fn samples(all: &[Recorded], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    matching(all, name, labels)
        .flat_map(|r| match &r.value {
            Value::Histogram(values) => values.clone(),
            _ => panic!("{name} is not a histogram"),
        })
        .collect()
}

/// The gauge `name` with exactly these labels.
fn gauge(all: &[Recorded], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = matching(all, name, labels)
        .map(|r| match r.value {
            Value::Gauge(v) => v,
            _ => panic!("{name} is not a gauge"),
        })
        .collect();
    assert_eq!(found.len(), 1, "one gauge {name} {labels:?}");
    found[0]
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn local_cluster(n: usize) -> Vec<Arc<dyn NetLocker>> {
    (0..n)
        .map(|i| Arc::new(LocalLocker::named(format!("node-{i}"))) as Arc<dyn NetLocker>)
        .collect()
}

/// Granted, would-block, timeout, cancelled and waited-for acquires, each
/// timed under its mode and outcome; rounds counted; locks held counted up
/// and down.
#[test]
fn acquires_are_timed_by_mode_and_outcome() {
    let (waiter_guard, all) = recorded(|| async {
        let lockers = local_cluster(3);
        let holder = Dsync::builder(lockers.clone())
            .owner("holder")
            .build()
            .unwrap();
        let other = Dsync::builder(lockers).owner("other").build().unwrap();
        let held = holder.rw_mutex(["a"]).unwrap().lock().await.unwrap();
        let mutex = other.rw_mutex(["a"]).unwrap();
        assert_eq!(mutex.try_read().await.unwrap_err(), Error::WouldBlock);
        assert_eq!(
            mutex.lock_timeout(secs(1)).await.unwrap_err(),
            Error::Timeout
        );
        // Dropped while it waits: cancelled.
        assert!(tokio::time::timeout(secs(1), mutex.read()).await.is_err());
        let waiter = tokio::spawn(async move { mutex.lock().await });
        tokio::time::sleep(secs(2)).await;
        held.unlock().await.unwrap();
        waiter.await.unwrap().unwrap()
    });
    let write = |outcome| {
        samples(
            &all,
            names::ACQUIRE_SECONDS,
            &[("mode", "write"), ("outcome", outcome)],
        )
    };
    let read = |outcome| {
        samples(
            &all,
            names::ACQUIRE_SECONDS,
            &[("mode", "read"), ("outcome", outcome)],
        )
    };
    let granted = write("granted");
    assert_eq!(granted.len(), 2, "the holder and the waiter: {granted:?}");
    assert!(granted[0] < 0.01, "the first lock was free: {granted:?}");
    assert!(
        (granted[1] - 2.0).abs() < 0.05,
        "the waiter waited from 2 s in until the release at 4 s: {granted:?}"
    );
    let timeouts = write("timeout");
    assert_eq!(timeouts.len(), 1);
    assert!((timeouts[0] - 1.0).abs() < 0.01, "{timeouts:?}");
    assert_eq!(read("would_block").len(), 1);
    let cancelled = read("cancelled");
    assert_eq!(cancelled.len(), 1);
    assert!((cancelled[0] - 1.0).abs() < 0.01, "{cancelled:?}");
    assert!(read("granted").is_empty() && write("cancelled").is_empty());
    assert_eq!(
        counter(&all, names::ACQUIRE_ROUNDS, &[("mode", "write")]),
        3,
        "one wait each: the holder, the timed-out lock, the waiter"
    );
    assert_eq!(counter(&all, names::ACQUIRE_ROUNDS, &[("mode", "read")]), 2);
    assert_eq!(
        gauge(&all, names::LOCKS_HELD, &[]),
        1.0,
        "two locks taken, one released"
    );
    drop(waiter_guard);
}

/// Locker errors by kind, quarantine, release retries and both causes of
/// loss, on three nodes with injected faults.
#[test]
fn locker_faults_retries_and_losses_are_counted() {
    let ((), all) = recorded(|| async {
        let nodes: Vec<Arc<FaultyLocker>> = (0..3)
            .map(|i| {
                let local = Arc::new(LocalLocker::named(format!("node-{i}")));
                Arc::new(FaultyLocker::local(local, i))
            })
            .collect();
        let lockers: Vec<Arc<dyn NetLocker>> = nodes
            .iter()
            .map(|n| n.clone() as Arc<dyn NetLocker>)
            .collect();
        let ds = Dsync::builder(lockers)
            .owner("metrics-test")
            .rng_seed(9)
            .lease(Lease {
                validity: secs(2),
                refresh_interval: Duration::from_millis(500),
                safety_margin: Duration::from_millis(600),
            })
            // A refresh round to silent nodes ends (unconfirmed) long
            // before the holder's deadline, whatever runs first at an
            // instant: the test counts both.
            .timeouts(Timeouts {
                refresh: Duration::from_millis(200),
                ..Timeouts::default()
            })
            .build()
            .unwrap();

        // Two nodes refuse connections: no quorum for a try.
        nodes[1].set_refuse(true);
        nodes[2].set_refuse(true);
        let err = ds.rw_mutex(["q"]).unwrap().try_lock().await.unwrap_err();
        assert!(matches!(err, Error::QuorumUnavailable { .. }), "{err}");
        nodes[1].heal();
        nodes[2].heal();

        // An unlock that one node refuses is retried until it lands.
        let c = ds.rw_mutex(["c"]).unwrap().lock().await.unwrap();
        nodes[2].set_refuse(true);
        c.unlock().await.unwrap();
        tokio::time::sleep(secs(1)).await;
        nodes[2].heal();
        tokio::time::sleep(secs(10)).await;

        // Forced open: the next refresh finds nothing.
        let b = ds.rw_mutex(["b"]).unwrap().lock().await.unwrap();
        ds.force_unlock(["b"]).await.unwrap();
        tokio::time::timeout(secs(5), b.lost()).await.unwrap();

        // A restarted node refuses grants in quarantine; the others grant.
        nodes[0].restart();
        let d = ds.rw_mutex(["d"]).unwrap().lock().await.unwrap();
        // Refreshed a few times, then nodes 1 and 2 go silent: no refresh
        // can be confirmed any more.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        nodes[1].set_hang(true);
        nodes[2].set_hang(true);
        tokio::time::timeout(secs(5), d.lost()).await.unwrap();
        assert!(d.is_lost());
        // The guard saw its deadline pass on its own timer; the keeper
        // declares the loss (and counts it) when it next runs.
        tokio::time::sleep(secs(5)).await;
    });
    let node = |i: usize| format!("node-{i}");

    assert_eq!(
        samples(
            &all,
            names::ACQUIRE_SECONDS,
            &[("outcome", "quorum_unavailable")]
        )
        .len(),
        1
    );
    assert!(
        counter(
            &all,
            names::LOCKER_ERRORS,
            &[
                ("locker", &node(1)),
                ("call", "lock"),
                ("error", "unavailable")
            ]
        ) >= 1
    );
    assert!(
        counter(&all, names::RELEASE_RETRIES, &[]) >= 1,
        "the refused unlock was retried"
    );
    assert_eq!(counter(&all, names::RELEASES_GIVEN_UP, &[]), 0);
    assert_eq!(
        counter(&all, names::LOCKS_LOST, &[("cause", "not_found")]),
        1
    );
    assert_eq!(
        counter(&all, names::LOCKS_LOST, &[("cause", "refresh_missed")]),
        1
    );
    assert!(counter(&all, names::REFRESHES, &[("outcome", "confirmed")]) >= 1);
    assert!(counter(&all, names::REFRESHES, &[("outcome", "not_found")]) >= 1);
    assert!(counter(&all, names::REFRESHES, &[("outcome", "unconfirmed")]) >= 1);
    assert!(
        counter(
            &all,
            names::LOCKER_ERRORS,
            &[("locker", &node(0)), ("error", "quarantined")]
        ) >= 1,
        "the restarted node refused in quarantine"
    );
    assert_eq!(
        gauge(&all, names::LOCKER_QUARANTINED, &[("locker", &node(0))]),
        1.0
    );
    assert_eq!(
        gauge(&all, names::LOCKER_QUARANTINED, &[("locker", &node(1))]),
        0.0
    );
    let timeouts = counter(
        &all,
        names::LOCKER_ERRORS,
        &[
            ("locker", &node(1)),
            ("call", "refresh"),
            ("error", "timeout"),
        ],
    );
    assert!(timeouts >= 1, "the silent node's refreshes timed out");
    assert_eq!(
        samples(
            &all,
            names::LOCKER_CALL_SECONDS,
            &[("locker", &node(1)), ("call", "refresh")]
        )
        .len() as u64,
        timeouts,
        "a call that timed out waited, so it is timed"
    );
    assert_eq!(
        gauge(&all, names::LOCKER_ONLINE, &[("locker", &node(1))]),
        0.0
    );
    assert_eq!(
        gauge(&all, names::LOCKER_ONLINE, &[("locker", &node(0))]),
        1.0
    );
    assert_eq!(
        gauge(&all, names::LOCKS_HELD, &[]),
        0.0,
        "every lock released or lost"
    );
}
