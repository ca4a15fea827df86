//! The lock server's metrics: their names, descriptions and handles, the
//! classification of requests into bounded labels (the refusal kinds are
//! in `labels.rs`), and the table's gauges, which `sampler.rs` sets
//! (feature `metrics`; without it every method here is empty and nothing
//! is recorded).
//!
//! Handles are registered once, when the [`LockServer`](super::LockServer)
//! is created, with the recorder installed then; a request then pays a
//! counter increment and a histogram sample on handles it indexes by its
//! kind, never a lookup by name or label. Gauges of the table (entries,
//! tombstones, quarantine left) are sampled once a second by a task that
//! [`serve`](super::LockServer::serve) owns.
//!
//! Labels take a handful of fixed values each: never a resource name, uid,
//! token or peer address.

#[cfg(feature = "metrics")]
use std::time::Duration;

#[cfg(feature = "metrics")]
use ::metrics::{Counter, Gauge, Histogram, Unit};

use super::labels::{AuthRefusal, Limit};
#[cfg(feature = "metrics")]
use super::wire::{ErrorKind, Op, Reply, WireWaitReply};

/// Connections open, by `state` (`handshake`, `authenticated`).
#[cfg(feature = "metrics")]
pub(crate) const CONNECTIONS: &str = "quorum_lock_server_connections";
/// Connections accepted and given a slot.
#[cfg(feature = "metrics")]
pub(crate) const CONNECTIONS_ACCEPTED: &str = "quorum_lock_server_connections_accepted_total";
/// Requests answered, by `op` and `result`.
#[cfg(feature = "metrics")]
pub(crate) const REQUESTS: &str = "quorum_lock_server_requests_total";
/// Time to answer a request, by `op`.
#[cfg(feature = "metrics")]
pub(crate) const REQUEST_SECONDS: &str = "quorum_lock_server_request_seconds";
/// Handshakes refused, by `reason`.
#[cfg(feature = "metrics")]
pub(crate) const AUTH_REFUSED: &str = "quorum_lock_server_auth_refused_total";
/// Connections, frames and requests refused by a limit, by `limit`.
#[cfg(feature = "metrics")]
pub(crate) const LIMIT_REFUSALS: &str = "quorum_lock_server_limit_refusals_total";
/// Entries in the lock table.
#[cfg(feature = "metrics")]
pub(crate) const ENTRIES: &str = "quorum_lock_server_entries";
/// Resource names in the lock table.
#[cfg(feature = "metrics")]
pub(crate) const RESOURCES: &str = "quorum_lock_server_resources";
/// Bytes the lock table is charged for.
#[cfg(feature = "metrics")]
pub(crate) const LOCK_BYTES: &str = "quorum_lock_server_lock_bytes";
/// Released uids remembered.
#[cfg(feature = "metrics")]
pub(crate) const TOMBSTONES: &str = "quorum_lock_server_tombstones";
/// Bytes of released uids remembered.
#[cfg(feature = "metrics")]
pub(crate) const TOMBSTONE_BYTES: &str = "quorum_lock_server_tombstone_bytes";
/// Seconds of quarantine left.
#[cfg(feature = "metrics")]
pub(crate) const QUARANTINE_SECONDS: &str = "quorum_lock_server_quarantine_seconds";

/// A request's kind: the value of the `op` label.
#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    RLock,
    Unlock,
    RUnlock,
    Refresh,
    ForceUnlock,
    LockWait,
    Fence,
    List,
    Health,
    Status,
    Proclaim,
    Leader,
}

#[cfg(feature = "metrics")]
const KINDS: usize = 13;

#[cfg(feature = "metrics")]
impl Kind {
    const ALL: [Kind; KINDS] = [
        Kind::Lock,
        Kind::RLock,
        Kind::Unlock,
        Kind::RUnlock,
        Kind::Refresh,
        Kind::ForceUnlock,
        Kind::LockWait,
        Kind::Fence,
        Kind::List,
        Kind::Health,
        Kind::Status,
        Kind::Proclaim,
        Kind::Leader,
    ];

    fn of(op: &Op) -> Kind {
        match op {
            Op::Lock(..) => Kind::Lock,
            Op::RLock(..) => Kind::RLock,
            Op::Unlock(..) => Kind::Unlock,
            Op::RUnlock(..) => Kind::RUnlock,
            Op::Refresh(..) => Kind::Refresh,
            Op::ForceUnlock(..) => Kind::ForceUnlock,
            Op::LockWait { .. } => Kind::LockWait,
            Op::Fence { .. } => Kind::Fence,
            Op::List | Op::ListPage { .. } => Kind::List,
            Op::Health => Kind::Health,
            Op::Status => Kind::Status,
            Op::Proclaim { .. } => Kind::Proclaim,
            Op::Leader { .. } => Kind::Leader,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::RLock => "rlock",
            Kind::Unlock => "unlock",
            Kind::RUnlock => "runlock",
            Kind::Refresh => "refresh",
            Kind::ForceUnlock => "force_unlock",
            Kind::LockWait => "lock_wait",
            Kind::Fence => "fence",
            Kind::List => "list",
            Kind::Health => "health",
            Kind::Status => "status",
            Kind::Proclaim => "proclaim",
            Kind::Leader => "leader",
        }
    }

    /// The results a request of this kind can have; [`Kind::result`] never
    /// gives another, so only these series exist.
    fn results(self) -> &'static [Outcome] {
        use Outcome::*;
        match self {
            Kind::Lock | Kind::RLock => &[Granted, Refused, Error],
            Kind::LockWait => &[Granted, Queued, Refused, Error],
            Kind::Unlock | Kind::RUnlock | Kind::Refresh => &[Ok, Refused, Error],
            Kind::ForceUnlock => &[Ok, Refused, Error, Forbidden],
            Kind::List => &[Ok, Error, Forbidden],
            Kind::Fence => &[Ok, Refused, Error],
            Kind::Health | Kind::Status | Kind::Leader => &[Ok, Error],
            Kind::Proclaim => &[Ok, Refused, Error],
        }
    }

    /// The `result` of answering a request of this kind with `reply`.
    fn result(self, reply: &Reply) -> Outcome {
        let grants = matches!(self, Kind::Lock | Kind::RLock);
        let confirms = matches!(
            self,
            Kind::Unlock | Kind::RUnlock | Kind::Refresh | Kind::ForceUnlock | Kind::Proclaim
        );
        let may_forbid = matches!(self, Kind::ForceUnlock | Kind::List);
        match reply {
            Reply::Error {
                kind: ErrorKind::Forbidden,
                ..
            } if may_forbid => Outcome::Forbidden,
            Reply::Error { .. } => Outcome::Error,
            Reply::Bool(true) if grants => Outcome::Granted,
            Reply::Bool(false) if grants || confirms => Outcome::Refused,
            Reply::Bool(true) if confirms => Outcome::Ok,
            Reply::Wait(wait) if self == Kind::LockWait => match wait {
                WireWaitReply::Granted => Outcome::Granted,
                WireWaitReply::Queued => Outcome::Queued,
                WireWaitReply::Refused => Outcome::Refused,
            },
            Reply::Fence(Some(_)) if self == Kind::Fence => Outcome::Ok,
            Reply::Fence(None) if self == Kind::Fence => Outcome::Refused,
            Reply::Locks(_) | Reply::LocksPage { .. } if self == Kind::List => Outcome::Ok,
            Reply::Health { .. } if self == Kind::Health => Outcome::Ok,
            Reply::Status { .. } if self == Kind::Status => Outcome::Ok,
            Reply::Leader(_) if self == Kind::Leader => Outcome::Ok,
            // Not an answer this request can have.
            _ => Outcome::Error,
        }
    }
}

/// A request's result: the value of the `result` label.
#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A lock granted (at once, or to a wait).
    Granted,
    /// A wait queued: the grant will be pushed.
    Queued,
    /// A lock, wait, refresh or fencing token refused, or a release that
    /// found nothing to release.
    Refused,
    /// Any other request done.
    Ok,
    /// Answered with an error: a limit, a bad argument, the quarantine.
    Error,
    /// Needs the admin token.
    Forbidden,
}

#[cfg(feature = "metrics")]
const OUTCOMES: usize = 6;

#[cfg(feature = "metrics")]
impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::Queued => "queued",
            Outcome::Refused => "refused",
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Forbidden => "forbidden",
        }
    }
}

/// Describes every server metric to the installed recorder, with its unit.
/// [`ServerMetrics::new`] calls it; an exporter shows the descriptions as
/// `# HELP`.
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        CONNECTIONS,
        Unit::Count,
        "Connections open, by state: handshake (not yet authenticated) or authenticated."
    );
    describe_counter!(
        CONNECTIONS_ACCEPTED,
        Unit::Count,
        "Connections accepted and given a slot (those refused at the connection limit are in \
         quorum_lock_server_limit_refusals_total)."
    );
    describe_counter!(
        REQUESTS,
        Unit::Count,
        "Requests answered, by op and result (granted, queued, refused, ok, error, forbidden)."
    );
    describe_histogram!(
        REQUEST_SECONDS,
        Unit::Seconds,
        "Time the server took to answer a request, by op; a queued wait counts until it is \
         queued, not until it is granted."
    );
    describe_counter!(
        AUTH_REFUSED,
        Unit::Count,
        "Handshakes refused, by reason: token, version, malformed, timeout, tls."
    );
    describe_counter!(
        LIMIT_REFUSALS,
        Unit::Count,
        "Connections, frames and requests refused by a limit, by the limit's name."
    );
    describe_gauge!(
        ENTRIES,
        Unit::Count,
        "Entries in the lock table: one per resource per holder."
    );
    describe_gauge!(
        RESOURCES,
        Unit::Count,
        "Resource names in the lock table: held, or waited for."
    );
    describe_gauge!(
        LOCK_BYTES,
        Unit::Bytes,
        "Bytes the lock table is charged for, as limited by max_lock_bytes."
    );
    describe_gauge!(
        TOMBSTONES,
        Unit::Count,
        "Released lock uids remembered, to refuse requests that arrive after their release."
    );
    describe_gauge!(
        TOMBSTONE_BYTES,
        Unit::Bytes,
        "Bytes of released lock uids remembered, as limited by max_released_bytes."
    );
    describe_gauge!(
        QUARANTINE_SECONDS,
        Unit::Seconds,
        "Seconds left in the quarantine after a restart, during which new grants are refused; \
         0 when not in quarantine."
    );
}

/// The handles of one server's metrics, registered with the recorder
/// installed when the server was created.
#[cfg(feature = "metrics")]
struct Handles {
    handshaking: Gauge,
    authenticated: Gauge,
    accepted: Counter,
    /// By kind, then by outcome; a no-op where the kind never has that
    /// outcome.
    requests: [[Counter; OUTCOMES]; KINDS],
    seconds: [Histogram; KINDS],
    auth_refused: [Counter; AuthRefusal::ALL.len()],
    limits: [Counter; Limit::ALL.len()],
    entries: Gauge,
    resources: Gauge,
    lock_bytes: Gauge,
    tombstones: Gauge,
    tombstone_bytes: Gauge,
    quarantine: Gauge,
}

/// What the gauges of the table show, as the sampler read them.
#[cfg(feature = "metrics")]
pub(crate) struct Gauges {
    pub(crate) entries: usize,
    pub(crate) resources: usize,
    pub(crate) lock_bytes: usize,
    pub(crate) tombstones: usize,
    pub(crate) tombstone_bytes: usize,
    pub(crate) quarantine: Duration,
}

/// One server's metrics; empty without the feature `metrics`.
pub(crate) struct ServerMetrics {
    #[cfg(feature = "metrics")]
    handles: Box<Handles>,
}

/// A request being answered, from [`ServerMetrics::started`].
pub(crate) struct Started {
    #[cfg(feature = "metrics")]
    kind: Kind,
    #[cfg(feature = "metrics")]
    at: std::time::Instant,
}

impl ServerMetrics {
    /// Registers the handles with the recorder installed now.
    pub(crate) fn new() -> Self {
        #[cfg(feature = "metrics")]
        {
            describe();
            let state = |state: &'static str| ::metrics::gauge!(CONNECTIONS, "state" => state);
            let requests = Kind::ALL.map(|kind| {
                let mut row: [Counter; OUTCOMES] = std::array::from_fn(|_| Counter::noop());
                for &outcome in kind.results() {
                    row[outcome as usize] = ::metrics::counter!(
                        REQUESTS,
                        "op" => kind.label(),
                        "result" => outcome.label()
                    );
                }
                row
            });
            let handles = Handles {
                handshaking: state("handshake"),
                authenticated: state("authenticated"),
                accepted: ::metrics::counter!(CONNECTIONS_ACCEPTED),
                requests,
                seconds: Kind::ALL
                    .map(|kind| ::metrics::histogram!(REQUEST_SECONDS, "op" => kind.label())),
                auth_refused: AuthRefusal::ALL
                    .map(|reason| ::metrics::counter!(AUTH_REFUSED, "reason" => reason.label())),
                limits: Limit::ALL
                    .map(|limit| ::metrics::counter!(LIMIT_REFUSALS, "limit" => limit.label())),
                entries: ::metrics::gauge!(ENTRIES),
                resources: ::metrics::gauge!(RESOURCES),
                lock_bytes: ::metrics::gauge!(LOCK_BYTES),
                tombstones: ::metrics::gauge!(TOMBSTONES),
                tombstone_bytes: ::metrics::gauge!(TOMBSTONE_BYTES),
                quarantine: ::metrics::gauge!(QUARANTINE_SECONDS),
            };
            ServerMetrics {
                handles: Box::new(handles),
            }
        }
        #[cfg(not(feature = "metrics"))]
        ServerMetrics {}
    }

    /// A connection was accepted and holds a slot, in its handshake.
    #[inline]
    pub(crate) fn connection_opened(&self) {
        #[cfg(feature = "metrics")]
        {
            self.handles.accepted.increment(1);
            self.handles.handshaking.increment(1.0);
        }
    }

    /// A connection in its handshake authenticated.
    #[inline]
    pub(crate) fn connection_authenticated(&self) {
        #[cfg(feature = "metrics")]
        {
            self.handles.handshaking.decrement(1.0);
            self.handles.authenticated.increment(1.0);
        }
    }

    /// A connection closed, after it `authenticated` or in its handshake.
    #[inline]
    pub(crate) fn connection_closed(&self, authenticated: bool) {
        #[cfg(feature = "metrics")]
        {
            let state = if authenticated {
                &self.handles.authenticated
            } else {
                &self.handles.handshaking
            };
            state.decrement(1.0);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = authenticated;
    }

    /// A handshake was refused.
    #[inline]
    pub(crate) fn auth_refused(&self, reason: AuthRefusal) {
        #[cfg(feature = "metrics")]
        self.handles.auth_refused[reason as usize].increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = reason;
    }

    /// A limit refused a connection, a frame or a request.
    #[inline]
    pub(crate) fn refused_by(&self, limit: Limit) {
        #[cfg(feature = "metrics")]
        self.handles.limits[limit as usize].increment(1);
        #[cfg(not(feature = "metrics"))]
        let _ = limit;
    }

    /// A request `op` is being answered.
    #[cfg(feature = "metrics")]
    #[inline]
    pub(crate) fn started(&self, op: &Op) -> Started {
        Started {
            kind: Kind::of(op),
            at: std::time::Instant::now(),
        }
    }

    /// A request `op` is being answered.
    #[cfg(not(feature = "metrics"))]
    #[inline]
    pub(crate) fn started(&self, op: &super::wire::Op) -> Started {
        let _ = op;
        Started {}
    }

    /// The request `started` was answered with `reply`.
    #[cfg(feature = "metrics")]
    #[inline]
    pub(crate) fn answered(&self, started: Started, reply: &Reply) {
        let kind = started.kind as usize;
        let outcome = started.kind.result(reply) as usize;
        self.handles.requests[kind][outcome].increment(1);
        self.handles.seconds[kind].record(started.at.elapsed().as_secs_f64());
    }

    /// The request `started` was answered with `reply`.
    #[cfg(not(feature = "metrics"))]
    #[inline]
    pub(crate) fn answered(&self, started: Started, reply: &super::wire::Reply) {
        let _ = (started, reply);
    }

    /// Sets the gauges of the table.
    #[cfg(feature = "metrics")]
    pub(crate) fn sample(&self, gauges: &Gauges) {
        let handles = &self.handles;
        handles.entries.set(gauges.entries as f64);
        handles.resources.set(gauges.resources as f64);
        handles.lock_bytes.set(gauges.lock_bytes as f64);
        handles.tombstones.set(gauges.tombstones as f64);
        handles.tombstone_bytes.set(gauges.tombstone_bytes as f64);
        handles.quarantine.set(gauges.quarantine.as_secs_f64());
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use ::metrics::{Key, KeyName, Metadata, Recorder, SharedString};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
    use crate::{LocalLocker, LockArgs, NetLocker};

    /// Keeps the value of every counter and gauge, readable at any time
    /// without resetting it; histograms are not kept.
    #[derive(Default)]
    struct Kept {
        values: Mutex<HashMap<String, Arc<AtomicU64>>>,
    }

    /// `name{k=v,...}`, labels sorted.
    fn series(name: &str, labels: &[(&str, &str)]) -> String {
        let mut labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.sort();
        format!("{name}{{{}}}", labels.join(","))
    }

    impl Kept {
        fn slot(&self, key: &Key) -> Arc<AtomicU64> {
            let labels: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            let mut values = self.values.lock().unwrap();
            values
                .entry(series(key.name(), &labels))
                .or_default()
                .clone()
        }

        fn raw(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
            let values = self.values.lock().unwrap();
            let series = series(name, labels);
            let value = values.get(&series);
            value
                .unwrap_or_else(|| panic!("no series {series}"))
                .load(Ordering::SeqCst)
        }

        fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
            self.raw(name, labels)
        }

        fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
            f64::from_bits(self.raw(name, labels))
        }
    }

    impl Recorder for Kept {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.slot(key))
        }

        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.slot(key))
        }

        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Polls `check` every 10 ms, for at most 5 s.
    async fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..500 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// A handshake frame whose announced length is past `MAX_HELLO_FRAME`.
    async fn oversized_hello(addr: std::net::SocketAddr) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&(1u32 << 20).to_be_bytes()).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest));
        let _ = read.await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_in_process_server_counts_requests_connections_and_limits() {
        let kept = Kept::default();
        let mut config = ServerConfig::new("secret");
        config.max_connections = 2;
        config.admin_reserve = 0;
        let server = ::metrics::with_local_recorder(&kept, || {
            LockServer::new(Arc::new(LocalLocker::new()), config).unwrap()
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr, serve) = server
            .bind("127.0.0.1:0".parse().unwrap(), async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        let serving = tokio::spawn(serve);

        let client = RemoteLocker::connect(addr.to_string(), RemoteConfig::new("secret"))
            .await
            .unwrap();
        let args = LockArgs {
            uid: "uid-1".into(),
            resources: vec!["x".to_owned()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        assert!(client.lock(&args).await.unwrap());
        let long = LockArgs {
            uid: "u".repeat(crate::net::MAX_UID_LEN + 1).into(),
            ..args.clone()
        };
        let refused = client.lock(&long).await;
        assert!(refused.is_err(), "{refused:?}");
        let lock = |result| kept.counter(REQUESTS, &[("op", "lock"), ("result", result)]);
        assert_eq!((lock("granted"), lock("error")), (1, 1));
        let limit = |limit| kept.counter(LIMIT_REFUSALS, &[("limit", limit)]);
        assert_eq!(limit("field_length"), 1);
        eventually("the table's sample", || kept.gauge(ENTRIES, &[]) == 1.0).await;
        assert_eq!(kept.gauge(RESOURCES, &[]), 1.0);

        // A handshake too large is refused by the hello limit, as malformed.
        oversized_hello(addr).await;
        eventually("the hello refusal", || limit("max_hello_frame") == 1).await;
        let refused = |reason| kept.counter(AUTH_REFUSED, &[("reason", reason)]);
        assert_eq!((refused("malformed"), refused("token")), (1, 0));

        // The second slot goes to a connection that never authenticates; a
        // newcomer that speaks takes its place.
        let state = |state| kept.gauge(CONNECTIONS, &[("state", state)]);
        eventually("the refused connection closed", || {
            state("handshake") == 0.0
        })
        .await;
        let _idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        eventually("a connection in its handshake", || {
            state("handshake") == 1.0
        })
        .await;
        // A newcomer that speaks takes the place of a silent connection once
        // that one had its grace (100 ms) to speak (a silent newcomer would
        // wait at the door instead).
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut next = tokio::net::TcpStream::connect(addr).await.unwrap();
        next.write_all(&[0]).await.unwrap();
        let accepted = || kept.counter(CONNECTIONS_ACCEPTED, &[]);
        eventually("an eviction", || {
            limit("max_connections") == 1 && accepted() == 4
        })
        .await;
        eventually("the evicted connection closed", || {
            state("handshake") == 1.0
        })
        .await;
        assert_eq!(state("authenticated"), 1.0);

        let _ = stop.send(());
        serving.await.unwrap();
        eventually("every connection closed", || {
            state("handshake") == 0.0 && state("authenticated") == 0.0
        })
        .await;
    }

    #[test]
    fn every_reply_counts_under_a_registered_result() {
        use crate::net::wire::{ErrorKind, Reply, WireWaitReply};
        let replies = [
            Reply::Bool(true),
            Reply::Bool(false),
            Reply::Locks(Vec::new()),
            Reply::Error {
                kind: ErrorKind::Forbidden,
                message: String::new(),
            },
            Reply::Error {
                kind: ErrorKind::Unavailable,
                message: String::new(),
            },
            Reply::Wait(WireWaitReply::Granted),
            Reply::Wait(WireWaitReply::Queued),
            Reply::Wait(WireWaitReply::Refused),
            Reply::Fence(Some(1)),
            Reply::Fence(None),
        ];
        for kind in Kind::ALL {
            for reply in &replies {
                let result = kind.result(reply);
                assert!(
                    kind.results().contains(&result),
                    "{kind:?} answered {reply:?} counts as {result:?}, which has no series"
                );
            }
        }
    }
}
