//! Leader election on Redis nodes: a proclamation lives exactly as long as
//! its holder's exclusive entry (released, forced open or expired, it is
//! never reported again), values are bytes, watches are pushed across
//! lockers by the change notices of the scripts, and a node in quarantine
//! answers the quarantine error.
#![cfg(all(feature = "redis", feature = "testing"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::redis::RedisConfig;
use quorum_lock::{
    Dsync, Error, Leader, LockArgs, LockMode, NetLocker, Observer, Proclamation, PushEvent,
    PushSink, Ticket, Timeouts, WaitArgs, WaitReply, Wake, WatchArgs, MAX_VALUE_LEN,
};
use tokio::time::{sleep, timeout, Instant};

use crate::redis_support::{locker, locker_with, raw, RedisServer};

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "test".into(),
        source: "tests/redis/election.rs".into(),
        quorum: 1,
    }
}

fn proclamation(term: u64, seq: u64, value: &[u8]) -> Proclamation {
    Proclamation::new(term, seq, value.to_vec()).expect("a valid proclamation")
}

/// The pushes a locker sent.
#[derive(Default)]
struct Inbox(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

impl Inbox {
    fn changes(&self, uid: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(u, e)| u == uid && *e == PushEvent::Changed)
            .count()
    }

    /// Waits (at most 5 s) until `uid` was pushed more than `seen` changes.
    async fn changed_past(&self, uid: &str, seen: usize) -> bool {
        let give_up = Instant::now() + Duration::from_secs(5);
        while self.changes(uid) <= seen {
            if Instant::now() >= give_up {
                return false;
            }
            sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

fn watch(inbox: &Arc<Inbox>) -> WatchArgs {
    WatchArgs {
        ttl: Duration::from_secs(30),
        wake: Wake::new(inbox.clone(), 0),
    }
}

/// The fields of the hash of `resource` under the default prefix.
async fn fields(server: &RedisServer, resource: &str) -> Vec<String> {
    let key = format!("quorum-lock:{resource}");
    let all = raw(server).await.cmd(&["HGETALL", &key]).await.texts();
    all.chunks(2).map(|pair| pair[0].clone()).collect()
}

/// The server's clock in ms.
async fn server_ms(server: &RedisServer) -> u64 {
    let t = raw(server).await.cmd(&["TIME"]).await.texts();
    let secs: u64 = t[0].parse().expect("TIME seconds");
    let micros: u64 = t[1].parse().expect("TIME microseconds");
    secs * 1000 + micros / 1000
}

#[tokio::test]
async fn a_proclamation_goes_with_its_entry_and_watches_are_told() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker(&server, Duration::from_secs(60)).await;
    // Another locker of the same prefix, as another process would be: its
    // watches hear the notices of scripts run through `redis`.
    let observing = locker(&server, Duration::from_secs(60)).await;
    let inbox = Arc::new(Inbox::default());
    let observer = args("observer", "e");
    let p = proclamation(3, 0, b"node-a");

    // Released, forced open by resource, forced open by uid alone (the
    // scan): each time gone, and the watch is pushed.
    for how in ["unlock", "force by resource", "force by uid"] {
        let leader = args(&format!("leader-{how}"), "e");
        assert!(redis.lock(&leader).await.unwrap());
        assert!(redis.proclaim(&leader, &p).await.unwrap());
        assert_eq!(
            observing
                .leader(&observer, Some(&watch(&inbox)))
                .await
                .unwrap(),
            Some(p.clone())
        );
        let seen = inbox.changes("observer");
        let removed = match how {
            "unlock" => redis.unlock(&leader).await,
            "force by resource" => redis.force_unlock(&args("", "e")).await,
            _ => {
                let mut by_uid = leader.clone();
                by_uid.resources = Vec::new().into();
                redis.force_unlock(&by_uid).await
            }
        };
        assert!(removed.unwrap(), "{how} removed nothing");
        assert!(
            inbox.changed_past("observer", seen).await,
            "no change pushed after {how}"
        );
        assert_eq!(redis.leader(&observer, None).await.unwrap(), None, "{how}");
        assert!(fields(&server, "e").await.is_empty(), "{how} left fields");
        // The next holder does not inherit it.
        let next = args("next", "e");
        assert!(redis.lock(&next).await.unwrap());
        assert_eq!(redis.leader(&observer, None).await.unwrap(), None, "{how}");
        assert!(redis.unlock(&next).await.unwrap());
    }
}

/// An entry that expires while no script runs keeps its proclamation in
/// the hash until the next script: the read itself must not report it,
/// and its notice reaches the watches of other lockers.
#[tokio::test]
async fn an_expired_leader_is_never_reported() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let short = locker(&server, Duration::from_millis(300)).await;
    let long = locker(&server, Duration::from_secs(60)).await;
    let (leader, observer) = (args("leader", "e"), args("observer", "e"));
    let p = proclamation(9, 2, b"node-a");
    assert!(short.lock(&leader).await.unwrap());
    assert!(short.proclaim(&leader, &p).await.unwrap());
    // A place in line keeps the key alive past the leader's deadline, so
    // nothing but the scripts can drop the leader's fields.
    let reservation = WaitArgs {
        ticket: Ticket::now(),
        place_ttl: Duration::from_secs(30),
        wake: None,
    };
    let waiter = args("waiter", "e");
    assert_eq!(
        long.lock_wait(&waiter, LockMode::Write, &reservation)
            .await
            .unwrap(),
        WaitReply::Refused
    );
    let inbox = Arc::new(Inbox::default());
    assert_eq!(
        long.leader(&observer, Some(&watch(&inbox))).await.unwrap(),
        Some(p.clone())
    );
    let key = "quorum-lock:e";
    let deadline: u64 = raw(&server)
        .await
        .cmd(&["HGET", key, "d:leader"])
        .await
        .text()
        .parse()
        .expect("the leader's deadline");
    let give_up = Instant::now() + Duration::from_secs(5);
    while server_ms(&server).await <= deadline {
        assert!(Instant::now() < give_up, "the server clock stands still");
        sleep(Duration::from_millis(20)).await;
    }
    assert!(
        fields(&server, "e").await.contains(&"p:leader".to_owned()),
        "something dropped the proclamation before the read"
    );
    let seen = inbox.changes("observer");
    assert_eq!(
        short
            .leader(&args("other-observer", "e"), None)
            .await
            .unwrap(),
        None,
        "an expired leader was reported"
    );
    let left = fields(&server, "e").await;
    assert!(
        !left.iter().any(|f| f.ends_with(":leader")),
        "the expired leader's fields stayed: {left:?}"
    );
    assert!(
        inbox.changed_past("observer", seen).await,
        "the expiry the read noticed was not pushed to the other locker's watch"
    );
    assert!(!short.proclaim(&leader, &p).await.unwrap());
}

#[tokio::test]
async fn newer_proclamations_stand_and_values_are_bytes() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker(&server, Duration::from_secs(60)).await;
    let (leader, observer) = (args("leader", "e"), args("observer", "e"));
    assert!(!redis
        .proclaim(&leader, &proclamation(1, 0, b"x"))
        .await
        .unwrap());
    assert!(redis.lock(&leader).await.unwrap());
    let newer = proclamation(5, 1, b"newer");
    assert!(redis.proclaim(&leader, &newer).await.unwrap());
    // A late retry of an older one: stored answer, the newer one stays.
    assert!(redis
        .proclaim(&leader, &proclamation(5, 0, b"older"))
        .await
        .unwrap());
    assert!(redis
        .proclaim(&leader, &proclamation(4, 9, b"older term"))
        .await
        .unwrap());
    assert_eq!(redis.leader(&observer, None).await.unwrap(), Some(newer));
    // Every byte value, NUL and invalid UTF-8 included; the empty value;
    // the largest value.
    let every: Vec<u8> = (0..=255u8).rev().chain(0..=255u8).collect();
    for (seq, value) in [every, Vec::new(), vec![0xc3; MAX_VALUE_LEN]]
        .into_iter()
        .enumerate()
    {
        let p = proclamation(6, seq as u64, &value);
        assert!(redis.proclaim(&leader, &p).await.unwrap());
        assert_eq!(redis.leader(&observer, None).await.unwrap(), Some(p));
    }
    // One byte over the limit is refused before Redis sees it.
    let long = Proclamation {
        term: 7,
        seq: 0,
        value: vec![b'x'; MAX_VALUE_LEN + 1].into(),
    };
    assert!(matches!(
        redis.proclaim(&leader, &long).await,
        Err(Error::InvalidArgument(_))
    ));
    // An election names one resource.
    let mut two = leader.clone();
    two.resources = vec!["e".to_owned(), "f".to_owned()].into();
    assert!(matches!(
        redis.proclaim(&two, &proclamation(7, 0, b"x")).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        redis.leader(&two, None).await,
        Err(Error::InvalidArgument(_))
    ));
    // Readers never lead.
    assert!(redis.unlock(&leader).await.unwrap());
    let reader = args("reader", "e");
    assert!(redis.rlock(&reader).await.unwrap());
    assert!(!redis
        .proclaim(&reader, &proclamation(8, 0, b"r"))
        .await
        .unwrap());
    assert_eq!(redis.leader(&observer, None).await.unwrap(), None);
}

/// Rule Q: a node in quarantine vouches for nothing, so neither a
/// proclamation's answer nor a read counts; what a holder proclaims is
/// kept all the same, for when the quarantine ends.
#[tokio::test]
async fn a_node_in_quarantine_answers_the_quarantine_error() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let free = locker(&server, Duration::from_secs(60)).await;
    let fresh = locker_with(
        &server,
        RedisConfig {
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
            ..RedisConfig::default()
        },
    )
    .await;
    let is_quarantine = |err: &Error| matches!(err, Error::LockerUnavailable { reason, .. } if reason.contains("refusing new grants"));
    let (leader, observer) = (args("leader", "e"), args("observer", "e"));
    assert!(free.lock(&leader).await.unwrap());
    let p = proclamation(2, 0, b"node-a");
    let err = fresh.proclaim(&leader, &p).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let err = fresh.leader(&observer, None).await.unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    let inbox = Arc::new(Inbox::default());
    let err = fresh
        .leader(&observer, Some(&watch(&inbox)))
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    // Kept on the entry the holder holds.
    assert_eq!(free.leader(&observer, None).await.unwrap(), Some(p));
    // Nothing is stored for a uid that holds nothing, quarantine or not.
    let err = fresh
        .proclaim(&args("nobody", "e"), &proclamation(3, 0, b"x"))
        .await
        .unwrap_err();
    assert!(is_quarantine(&err), "{err}");
    assert!(!fields(&server, "e").await.contains(&"p:nobody".to_owned()));
}

/// Notices published while the subscription is down are lost; when it
/// comes back every watch is told to read again, instead of waiting for
/// its re-check.
#[tokio::test]
async fn a_subscription_that_comes_back_fires_every_watch() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let redis = locker(&server, Duration::from_secs(60)).await;
    let inbox = Arc::new(Inbox::default());
    assert_eq!(
        redis
            .leader(&args("observer", "e"), Some(&watch(&inbox)))
            .await
            .unwrap(),
        None
    );
    raw(&server)
        .await
        .cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .await;
    assert!(
        inbox.changed_past("observer", 0).await,
        "the watch was not fired when the subscription came back"
    );
}

/// The observer's next change, within 5 s: far inside its re-check.
async fn next(observer: &mut Observer) -> Option<Leader> {
    timeout(Duration::from_secs(5), observer.recv())
        .await
        .expect("a change within 5 s, long before the 30 s re-check")
        .expect("the observer runs")
}

/// Three Redis nodes, an observer whose re-check is far beyond the test's
/// bounds: it learns of an election, a resign and the next leader by push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_learns_of_a_resign_by_push() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    let dsync = || async {
        let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
        for server in &servers {
            lockers.push(locker(server, Duration::from_secs(60)).await);
        }
        Dsync::builder(lockers)
            .timeouts(Timeouts {
                wait_recheck: Duration::from_secs(30),
                ..Timeouts::default()
            })
            .build()
            .expect("valid settings")
    };
    // The observer and each candidate in processes of their own.
    let (watching, a, b) = (dsync().await, dsync().await, dsync().await);
    let mut observer = watching.election("primary").unwrap().observe().unwrap();
    let bound = Duration::from_secs(5);
    assert_eq!(next(&mut observer).await, None);
    let mut leading = a
        .election("primary")
        .unwrap()
        .campaign(&b"node-a"[..])
        .await
        .unwrap();
    let seen = next(&mut observer).await.expect("the new leader");
    assert_eq!(
        (seen.term, &seen.value[..]),
        (leading.term(), &b"node-a"[..])
    );
    // B waits in line behind A.
    let candidate = tokio::spawn({
        let election = b.election("primary").unwrap();
        async move { election.campaign(&b"node-b"[..]).await }
    });
    leading.proclaim(&b"node-a:2"[..]).await.unwrap();
    let seen = next(&mut observer).await.expect("the new value");
    assert_eq!(&seen.value[..], b"node-a:2");
    let resigned_at = Instant::now();
    leading.resign().await.unwrap();
    // Either "no leader" and then B, or B at once if it was elected before
    // the observer read again.
    let mut seen = next(&mut observer).await;
    if seen.is_none() {
        seen = next(&mut observer).await;
    }
    let seen = seen.expect("the next leader");
    assert!(resigned_at.elapsed() < bound);
    let b_leads = timeout(bound, candidate)
        .await
        .expect("B leads after A resigned")
        .unwrap()
        .unwrap();
    assert_eq!(
        (seen.term, &seen.value[..]),
        (b_leads.term(), &b"node-b"[..])
    );
    assert!(seen.term > leading.term());
}
