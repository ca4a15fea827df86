//! Leader election over lock servers (protocol version 5): campaign,
//! proclaim, resign and observe end to end over three servers on loopback,
//! with observers told by the servers' `Changed` pushes; a server of an
//! older protocol refusing election at once; the value limit; and the
//! server's memory account covering proclamations and watches.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig, ServerStats};
use quorum_lock::{
    Dsync, Error, LocalLocker, LockArgs, NetLocker, Proclamation, PushEvent, PushSink, Timeouts,
    Wake, WatchArgs, MAX_VALUE_LEN,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::loopback;
use crate::wire::{
    accepted, authenticate_as, frame, leader_request, proclaim_request, read_frame, read_varint,
    rejected, request, response, CHANGED, KIND_INVALID_ARGUMENT, OP_HEALTH, REPLY_ERROR,
    REPLY_HEALTH, REPLY_LEADER, REPLY_PUSH, VERSION_5,
};

const TOKEN: &str = "client-secret";

/// Long enough that nothing in these tests waits for it on a healthy
/// machine; a step that needs it has failed.
const PROMPT: Duration = Duration::from_secs(5);

struct Server {
    addr: String,
    stats: ServerStats,
    _stop: oneshot::Sender<()>,
}

async fn serve(config: ServerConfig) -> Server {
    let server = LockServer::new(Arc::new(LocalLocker::new()), config).expect("valid config");
    let stats = server.stats();
    let (bound, stop) = loopback::serve(server).await;
    Server {
        addr: bound.to_string(),
        stats,
        _stop: stop,
    }
}

async fn remote(addr: &str) -> RemoteLocker {
    RemoteLocker::connect(addr, RemoteConfig::new(TOKEN))
        .await
        .expect("connect to the test server")
}

fn args(uid: &str, resource: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "election-test".into(),
        source: "tests/net/election.rs".into(),
        quorum: 1,
    }
}

/// Forwards pushes to a channel.
struct Inbox(mpsc::UnboundedSender<(usize, String, PushEvent)>);

impl PushSink for Inbox {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        let _ = self.0.send((slot, uid.to_owned(), event));
    }
}

fn inbox() -> (
    Arc<Inbox>,
    mpsc::UnboundedReceiver<(usize, String, PushEvent)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Inbox(tx)), rx)
}

/// The next change an observer reports, within [`PROMPT`].
async fn next_change(observer: &mut quorum_lock::Observer) -> Option<quorum_lock::Leader> {
    tokio::time::timeout(PROMPT, observer.recv())
        .await
        .expect("the observer was told within 5 s: by push, since its re-check is 16 s away")
        .expect("the observer is running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_proclaim_resign_and_observe_over_three_servers_by_push() {
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(serve(ServerConfig::new(TOKEN)).await);
    }
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for server in &servers {
        let locker = remote(&server.addr).await;
        assert!(
            locker.protocol_version() >= Some(5),
            "election needs version 5"
        );
        lockers.push(Arc::new(locker));
    }
    // A re-check far beyond the test's patience (it is capped to a third
    // of what the lease trusts, 16.7 s here): whatever an observer learns
    // within `PROMPT`, a push told it.
    let ds = Dsync::builder(lockers)
        .timeouts(Timeouts {
            wait_recheck: Duration::from_secs(30),
            ..Timeouts::default()
        })
        .build()
        .expect("valid settings");
    let election = ds.election("scheduler").expect("a valid name");
    let mut observer = election.observe().expect("a runtime");
    assert_eq!(next_change(&mut observer).await, None, "nobody leads yet");
    assert_eq!(election.leader().await.expect("a quorum answers"), None);

    let mut first = election.campaign(&b"node-a"[..]).await.expect("leads");
    let seen = next_change(&mut observer).await.expect("a leader");
    assert_eq!((seen.term, &seen.value[..]), (first.term(), &b"node-a"[..]));
    let read = election.leader().await.expect("a quorum answers");
    assert_eq!(read.as_ref().map(|l| l.term), Some(first.term()));

    first
        .proclaim(&b"node-a:8080"[..])
        .await
        .expect("proclaimed");
    let seen = next_change(&mut observer).await.expect("a leader");
    assert_eq!(
        (seen.term, &seen.value[..]),
        (first.term(), &b"node-a:8080"[..])
    );

    // A second candidate waits in line behind the leader.
    let candidate = {
        let election = ds.election("scheduler").expect("a valid name");
        tokio::spawn(async move { election.campaign(&b"node-b"[..]).await })
    };
    first.resign().await.expect("a quorum confirmed");
    // The observer hears of the resignation, or straight of the next
    // leader if it was elected before the observer read again.
    let mut seen = next_change(&mut observer).await;
    if seen.is_none() {
        seen = next_change(&mut observer).await;
    }
    let second = tokio::time::timeout(PROMPT, candidate)
        .await
        .expect("the waiting candidate was elected by push")
        .expect("the task ran")
        .expect("leads");
    assert!(second.term() > first.term(), "terms only grow");
    let seen = seen.expect("the next leader");
    assert_eq!(
        (seen.term, &seen.value[..]),
        (second.term(), &b"node-b"[..])
    );

    let mut second = second;
    second.resign().await.expect("a quorum confirmed");
    assert_eq!(next_change(&mut observer).await, None, "told of the resign");
    assert_eq!(election.leader().await.expect("a quorum answers"), None);
    // Nothing is left of the election on the servers: its entries, the
    // proclamations and the watches are charged, and the leaders' charges
    // went with their releases. What is left is the observer's watches.
    drop(observer);
    for server in &servers {
        assert!(server.stats.lock_bytes() > 0, "the observer's watch");
        assert!(server.stats.lock_bytes() < 4096);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_pushed_changed_on_a_proclamation_and_a_release() {
    let server = serve(ServerConfig::new(TOKEN)).await;
    let leader = remote(&server.addr).await;
    let observer = remote(&server.addr).await;
    let (sink, mut pushes) = inbox();
    let watch = WatchArgs {
        ttl: Duration::from_secs(30),
        wake: Wake::new(sink, 7),
    };
    let look = args("observer-1", "e");
    assert_eq!(observer.leader(&look, Some(&watch)).await.unwrap(), None);

    let held = args("leader-1", "e");
    assert!(leader.lock(&held).await.unwrap());
    let p = Proclamation::new(3, 0, &b"v"[..]).unwrap();
    assert!(leader.proclaim(&held, &p).await.unwrap());
    let push = tokio::time::timeout(PROMPT, pushes.recv()).await.unwrap();
    assert_eq!(push, Some((7, "observer-1".to_owned(), PushEvent::Changed)));
    assert_eq!(
        observer.leader(&look, Some(&watch)).await.unwrap(),
        Some(p.clone())
    );

    assert!(leader.unlock(&held).await.unwrap());
    let push = tokio::time::timeout(PROMPT, pushes.recv()).await.unwrap();
    assert_eq!(push, Some((7, "observer-1".to_owned(), PushEvent::Changed)));
    assert_eq!(observer.leader(&look, None).await.unwrap(), None);
    // A proclamation by a uid that holds nothing is refused.
    assert!(!leader.proclaim(&held, &p).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_version_4_refuses_election_at_once() {
    // A real server, asked by a client that offers version 4.
    let server = serve(ServerConfig::new(TOKEN)).await;
    let mut config = RemoteConfig::new(TOKEN);
    config.protocol_version = 4;
    let old = RemoteLocker::connect(&server.addr, config).await.unwrap();
    assert_eq!(old.protocol_version(), Some(4));
    let p = Proclamation::new(1, 0, &b"v"[..]).unwrap();
    let err = old.proclaim(&args("u", "e"), &p).await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { what, .. } if what == "leader election"),
        "{err:?}"
    );
    let err = old.leader(&args("u", "e"), None).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");

    // A fake server that speaks versions 2 to 4, as a server of the last
    // release does: it rejects version 5 naming them, accepts 4, and then
    // never answers anything. Election calls must fail at once, without a
    // request that would wait for the call timeout.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(Mutex::new(0usize));
    let seen = requests.clone();
    let fake = tokio::spawn(async move {
        let mut kept = Vec::new();
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let Ok(hello) = read_frame(&mut stream, 4096).await else {
                continue;
            };
            let (version, _) = read_varint(&hello).expect("a version");
            let welcome = if version > 4 {
                rejected(&format!(
                    "protocol version {version} is not supported; this server speaks 2, 3 and 4"
                ))
            } else {
                accepted(version as u16, Duration::from_secs(60))
            };
            let _ = stream.write_all(&frame(&welcome)).await;
            if version <= 4 {
                let seen = seen.clone();
                kept.push(tokio::spawn(async move {
                    while read_frame(&mut stream, 1 << 20).await.is_ok() {
                        *seen.lock().unwrap() += 1;
                    }
                }));
            }
        }
    });
    let mut config = RemoteConfig::new(TOKEN);
    config.call_timeout = Duration::from_secs(30);
    let locker = RemoteLocker::connect(&addr, config).await.unwrap();
    assert_eq!(locker.protocol_version(), Some(4), "fell back to 4");
    let asked = tokio::time::timeout(Duration::from_secs(2), async {
        let proclaimed = locker.proclaim(&args("u", "e"), &p).await;
        let read = locker.leader(&args("u", "e"), None).await;
        (proclaimed, read)
    })
    .await
    .expect("answered at once, not after the call timeout");
    assert!(
        matches!(asked.0, Err(Error::Unsupported { .. })),
        "{:?}",
        asked.0
    );
    assert!(
        matches!(asked.1, Err(Error::Unsupported { .. })),
        "{:?}",
        asked.1
    );
    assert_eq!(*requests.lock().unwrap(), 0, "nothing was sent");

    // Over a Dsync of such lockers, an election reports it too.
    let ds = Dsync::new(vec![Arc::new(locker) as Arc<dyn NetLocker>]).unwrap();
    let election = ds.election("old").unwrap();
    let err = tokio::time::timeout(Duration::from_secs(2), election.leader())
        .await
        .expect("at once")
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    fake.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_over_the_limit_and_bad_election_calls_are_refused_clearly() {
    let server = serve(ServerConfig::new(TOKEN)).await;
    let locker = remote(&server.addr).await;
    let held = args("leader-2", "e");
    assert!(locker.lock(&held).await.unwrap());
    // The client refuses it without asking.
    let long = Proclamation {
        term: 1,
        seq: 0,
        value: vec![b'x'; MAX_VALUE_LEN + 1].into(),
    };
    let err = locker.proclaim(&held, &long).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("4096")),
        "{err:?}"
    );
    let fits = Proclamation::new(1, 0, vec![b'x'; MAX_VALUE_LEN]).unwrap();
    assert!(locker.proclaim(&held, &fits).await.unwrap());
    // Two resources are no election.
    let mut two = held.clone();
    two.resources = vec!["e".to_owned(), "f".to_owned()].into();
    let err = locker.proclaim(&two, &fits).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("exactly one resource")),
        "{err:?}"
    );
    let err = locker.leader(&two, None).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");

    // The server refuses it too, by id, and keeps the connection.
    let (mut raw, welcome) = authenticate_as(&server.addr, TOKEN, VERSION_5)
        .await
        .unwrap();
    assert_eq!(welcome[0], 0, "accepted");
    let mut frames = frame(&proclaim_request(
        1,
        "leader-2",
        &["e"],
        1,
        1,
        &vec![b'y'; MAX_VALUE_LEN + 1],
    ));
    frames.extend(frame(&leader_request(2, "o", &["e"], Some(Duration::ZERO))));
    frames.extend(frame(&request(3, OP_HEALTH)));
    raw.write_all(&frames).await.unwrap();
    for expected in 1..=3u64 {
        let payload = tokio::time::timeout(PROMPT, read_frame(&mut raw, 1 << 16))
            .await
            .unwrap()
            .unwrap();
        let (id, reply) = response(&payload);
        assert_eq!(id, expected);
        match id {
            1 | 2 => {
                assert_eq!(
                    reply[..2],
                    [REPLY_ERROR, KIND_INVALID_ARGUMENT],
                    "{reply:?}"
                );
                let message = String::from_utf8_lossy(&reply[2..]);
                let wanted = if id == 1 { "4096" } else { "ttl of zero" };
                assert!(message.contains(wanted), "{message}");
            }
            _ => assert_eq!(reply[0], REPLY_HEALTH),
        }
    }
    // The stored value is the one that fit.
    let found = locker.leader(&args("reader", "e"), None).await.unwrap();
    assert_eq!(found, Some(fits));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_account_covers_proclamations_and_watches() {
    let server = serve(ServerConfig::new(TOKEN)).await;
    let locker = remote(&server.addr).await;
    let held = args("leader-3", "e");
    assert!(locker.lock(&held).await.unwrap());
    let lock = server.stats.lock_bytes();
    let p = Proclamation::new(1, 0, vec![b'v'; MAX_VALUE_LEN]).unwrap();
    assert!(locker.proclaim(&held, &p).await.unwrap());
    let with_value = server.stats.lock_bytes();
    assert!(
        with_value >= lock + MAX_VALUE_LEN,
        "{with_value} after {lock}"
    );
    // A newer, shorter value of the same term is not charged twice.
    let shorter = Proclamation::new(1, 1, &b"v"[..]).unwrap();
    assert!(locker.proclaim(&held, &shorter).await.unwrap());
    assert_eq!(server.stats.lock_bytes(), with_value);
    // A watch is charged to the observer's uid.
    let (sink, _pushes) = inbox();
    let watch = WatchArgs {
        ttl: Duration::from_secs(10),
        wake: Wake::new(sink, 0),
    };
    locker
        .leader(&args("observer-3", "e"), Some(&watch))
        .await
        .unwrap();
    let watched = server.stats.lock_bytes();
    assert!(watched > with_value, "{watched} after {with_value}");
    // The release takes the value's charge with the lock's.
    assert!(locker.unlock(&held).await.unwrap());
    assert_eq!(server.stats.lock_bytes(), watched - with_value);

    // A connection whose budget holds the lock but not the value is
    // refused the value, with the limit named, and keeps its lock.
    let one_lock = lock + 64;
    let mut config = ServerConfig::new(TOKEN);
    config.max_bytes_per_connection = one_lock;
    let tight = serve(config).await;
    let locker = remote(&tight.addr).await;
    assert!(locker.lock(&held).await.unwrap());
    let err = locker.proclaim(&held, &p).await.unwrap_err();
    assert!(
        matches!(&err, Error::LockerUnavailable { reason, .. } if reason.contains("over its limit")),
        "{err:?}"
    );
    assert!(
        locker.proclaim(&held, &shorter).await.is_err(),
        "the overhead alone is over too"
    );
    assert_eq!(
        tight.stats.lock_bytes(),
        lock,
        "the refused value is not charged"
    );
    assert!(locker.refresh(&held).await.unwrap(), "the lock stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_a_closed_connection_is_dropped_and_others_still_pushed() {
    let server = serve(ServerConfig::new(TOKEN)).await;
    // A raw client registers a watch and goes away.
    let (mut raw, _) = authenticate_as(&server.addr, TOKEN, VERSION_5)
        .await
        .unwrap();
    raw.write_all(&frame(&leader_request(
        1,
        "gone",
        &["e"],
        Some(Duration::from_secs(30)),
    )))
    .await
    .unwrap();
    let payload = read_frame(&mut raw, 4096).await.unwrap();
    assert_eq!(response(&payload), (1, &[REPLY_LEADER, 0][..]));
    drop(raw);
    // A second raw client watches too and stays.
    let (mut stays, _) = authenticate_as(&server.addr, TOKEN, VERSION_5)
        .await
        .unwrap();
    stays
        .write_all(&frame(&leader_request(
            1,
            "stays",
            &["e"],
            Some(Duration::from_secs(30)),
        )))
        .await
        .unwrap();
    read_frame(&mut stays, 4096).await.unwrap();

    let locker = remote(&server.addr).await;
    let held = args("leader-4", "e");
    assert!(locker.lock(&held).await.unwrap());
    let p = Proclamation::new(1, 0, &b"v"[..]).unwrap();
    assert!(locker.proclaim(&held, &p).await.unwrap());
    // The push to the closed connection is dropped; the other arrives,
    // as a version-5 push of `Changed`.
    let payload = tokio::time::timeout(PROMPT, read_frame(&mut stays, 4096))
        .await
        .unwrap()
        .unwrap();
    let (id, reply) = response(&payload);
    assert_eq!(id, 0);
    assert_eq!(
        reply,
        [REPLY_PUSH, 5, b's', b't', b'a', b'y', b's', CHANGED]
    );
    // And the server serves on.
    assert!(locker.unlock(&held).await.unwrap());
}
