//! Waiting in line on a real `quorum-lock server` process, one locker call
//! at a time (protocol version 3): grants and wounds pushed on the waiter's
//! connection, the per-connection bound on places, places given up when
//! their connection closes, version-2 pollers keeping their turn against
//! push waiters, and fencing tokens that keep increasing across holders
//! and restarts.

use std::sync::Arc;
use std::time::Duration;

use crate::support::wire::{
    authenticate, authenticate_as, closed_within, frame, lock_request, lock_wait_request,
    read_frame, OP_LOCK, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_WAIT, VERSION_3,
};
use crate::support::{remote_config, Scratch, Server, TOKEN};
use quorum_lock::net::RemoteLocker;
use quorum_lock::{
    Error, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long a push may take on loopback before the test calls it missing.
const PUSH_LIMIT: Duration = Duration::from_secs(5);

fn args(uid: &str, name: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![name.to_string()].into(),
        owner: "net_waiting".into(),
        source: "cli/tests/commands/waiting.rs".into(),
        quorum: 1,
    }
}

type Pushes = mpsc::UnboundedReceiver<(usize, String, PushEvent)>;

/// Forwards every push to a channel the test reads.
struct Forward(mpsc::UnboundedSender<(usize, String, PushEvent)>);

impl PushSink for Forward {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        let _ = self.0.send((slot, uid.to_owned(), event));
    }
}

fn sink(slot: usize) -> (Wake, Pushes) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Wake::new(Arc::new(Forward(tx)), slot), rx)
}

fn waiting(ticket: Ticket, wake: &Wake) -> WaitArgs {
    WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(30),
        wake: Some(wake.clone()),
    }
}

async fn next_push(pushes: &mut Pushes, what: &str) -> (usize, String, PushEvent) {
    tokio::time::timeout(PUSH_LIMIT, pushes.recv())
        .await
        .unwrap_or_else(|_| panic!("no push within {PUSH_LIMIT:?}: {what}"))
        .expect("the sink is alive")
}

async fn no_push(pushes: &mut Pushes, within: Duration, what: &str) {
    if let Ok(push) = tokio::time::timeout(within, pushes.recv()).await {
        panic!("unexpected push {push:?}: {what}");
    }
}

async fn connect(server: &Server) -> RemoteLocker {
    RemoteLocker::connect(server.addr.to_string(), remote_config(TOKEN))
        .await
        .expect("connect")
}

async fn roundtrip(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("send");
    tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 1 << 20))
        .await
        .expect("a reply in time")
        .expect("a reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_and_wounds_are_pushed_on_the_waiters_connection() {
    let dir = Scratch::new("net-waiting-push");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let (holder, waiter, elder) = (
        connect(&server).await,
        connect(&server).await,
        connect(&server).await,
    );
    let h = args("holder", "x");
    assert!(holder.lock(&h).await.unwrap());

    let (wake, mut pushes) = sink(7);
    let w = args("waiter", "x");
    let ticket = Ticket::now();
    let reply = waiter
        .lock_wait(&w, LockMode::Write, &waiting(ticket, &wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));
    no_push(&mut pushes, Duration::from_millis(100), "x is still held").await;
    // Repeating the request renews the place.
    let reply = waiter
        .lock_wait(&w, LockMode::Write, &waiting(ticket, &wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));
    // A plain lock does not jump the line.
    assert!(!holder.lock(&args("barger", "x")).await.unwrap());

    assert!(holder.unlock(&h).await.unwrap());
    let push = next_push(&mut pushes, "the grant after the unlock").await;
    assert_eq!(push, (7, "waiter".to_owned(), PushEvent::Granted));
    // The grant is an entry like any other.
    assert!(waiter.refresh(&w).await.unwrap());
    assert!(!holder.lock(&args("late", "x")).await.unwrap());

    // An older waiter queued behind the grant wounds it.
    let (elder_wake, mut elder_pushes) = sink(1);
    let older = Ticket {
        at: ticket.at - 1,
        tiebreak: 0,
    };
    let e = args("elder", "x");
    let reply = elder
        .lock_wait(&e, LockMode::Write, &waiting(older, &elder_wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));
    let push = next_push(&mut pushes, "the wound").await;
    assert_eq!(push, (7, "waiter".to_owned(), PushEvent::Wounded));

    // The wounded waiter gives its grant back; the elder gets it.
    assert!(waiter.unlock(&w).await.unwrap());
    let push = next_push(&mut elder_pushes, "the elder's grant").await;
    assert_eq!(push, (1, "elder".to_owned(), PushEvent::Granted));
    no_push(
        &mut pushes,
        Duration::from_millis(100),
        "released: nothing more",
    )
    .await;
    assert!(elder.unlock(&e).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_per_connection_are_bounded_with_a_clear_error() {
    let dir = Scratch::new("net-waiting-bound");
    let server = Server::start(
        &dir,
        &["--no-quarantine", "--max-waiters-per-connection", "3"],
    );
    let (holder, waiter, other) = (
        connect(&server).await,
        connect(&server).await,
        connect(&server).await,
    );
    assert!(holder.lock(&args("holder", "busy")).await.unwrap());
    let (wake, _pushes) = sink(0);
    let mut tickets = Vec::new();
    for i in 0..3 {
        let ticket = Ticket::now();
        tickets.push(ticket);
        let reply = waiter
            .lock_wait(
                &args(&format!("w{i}"), "busy"),
                LockMode::Write,
                &waiting(ticket, &wake),
            )
            .await;
        assert_eq!(reply, Ok(WaitReply::Queued), "waiter {i}");
    }
    let fourth = waiter
        .lock_wait(
            &args("w3", "busy"),
            LockMode::Write,
            &waiting(Ticket::now(), &wake),
        )
        .await;
    match fourth {
        Err(Error::LockerUnavailable { reason, .. }) => {
            assert!(
                reason.contains("too many queued waiters on this connection (3)"),
                "{reason}"
            );
            assert!(reason.contains("--max-waiters-per-connection"), "{reason}");
        }
        other => panic!("expected the waiter limit, got {other:?}"),
    }
    // Renewing a place, or the same waiter under a new uid, still fits.
    let renew = waiter
        .lock_wait(
            &args("w0", "busy"),
            LockMode::Write,
            &waiting(tickets[0], &wake),
        )
        .await;
    assert_eq!(renew, Ok(WaitReply::Queued));
    let again = waiter
        .lock_wait(
            &args("w1-again", "busy"),
            LockMode::Write,
            &waiting(tickets[1], &wake),
        )
        .await;
    assert_eq!(again, Ok(WaitReply::Queued));
    // Another connection has its own bound.
    let elsewhere = other
        .lock_wait(
            &args("o0", "busy"),
            LockMode::Write,
            &waiting(Ticket::now(), &wake),
        )
        .await;
    assert_eq!(elsewhere, Ok(WaitReply::Queued));
    // Giving a place up makes room.
    assert!(!waiter.unlock(&args("w2", "busy")).await.unwrap());
    let room = waiter
        .lock_wait(
            &args("w4", "busy"),
            LockMode::Write,
            &waiting(Ticket::now(), &wake),
        )
        .await;
    assert_eq!(room, Ok(WaitReply::Queued));
    // The connection is still usable for everything else.
    assert!(waiter.lock(&args("free", "free")).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_gives_up_its_places_at_once() {
    let dir = Scratch::new("net-waiting-close");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr.to_string();
    let (holder, next) = (connect(&server).await, connect(&server).await);
    let h = args("holder", "handover");
    assert!(holder.lock(&h).await.unwrap());

    // The first waiter, on a raw connection it will close.
    let (mut first, welcome) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 3]);
    let ticket = Ticket::now();
    let wait = lock_wait_request(
        1,
        "first",
        &["handover"],
        (ticket.at, ticket.tiebreak),
        Duration::from_secs(30),
        true,
    );
    assert_eq!(roundtrip(&mut first, &wait).await, [1, REPLY_WAIT, QUEUED]);

    // The second waiter, behind it.
    let (wake, mut pushes) = sink(0);
    let n = args("second", "handover");
    let reply = next
        .lock_wait(&n, LockMode::Write, &waiting(Ticket::now(), &wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));

    // The first waiter goes away. The server ends the session (and gives
    // up its places) before it closes its end, so EOF means it is done.
    first.shutdown().await.unwrap();
    closed_within(&mut first, Duration::from_secs(5))
        .await
        .expect("the server closed its end");

    // Without the first waiter's place, the second is next: granted at
    // once, not after the first one's grant would have expired (6 s).
    assert!(holder.unlock(&h).await.unwrap());
    let push = tokio::time::timeout(Duration::from_secs(3), pushes.recv())
        .await
        .expect("granted within 3 s of the release")
        .expect("sink alive");
    assert_eq!(push, (0, "second".to_owned(), PushEvent::Granted));
    assert!(next.unlock(&n).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_moved_to_a_new_connection_keeps_its_place_when_the_old_one_closes() {
    let dir = Scratch::new("net-waiting-moved");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr.to_string();
    let (holder, moved) = (connect(&server).await, connect(&server).await);
    let h = args("holder", "moving");
    assert!(holder.lock(&h).await.unwrap());

    // The waiter queues over one connection...
    let (mut old, _) = authenticate_as(&addr, TOKEN, VERSION_3).await.unwrap();
    let ticket = Ticket::now();
    let wait = lock_wait_request(
        1,
        "mover",
        &["moving"],
        (ticket.at, ticket.tiebreak),
        Duration::from_secs(30),
        true,
    );
    assert_eq!(roundtrip(&mut old, &wait).await, [1, REPLY_WAIT, QUEUED]);
    // ...then asks again over a new one, as after a reconnect, while the
    // server has not noticed the old one is gone.
    let (wake, mut pushes) = sink(2);
    let m = args("mover", "moving");
    let reply = moved
        .lock_wait(&m, LockMode::Write, &waiting(ticket, &wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));
    old.shutdown().await.unwrap();
    closed_within(&mut old, Duration::from_secs(5))
        .await
        .expect("the server closed the old connection");

    // The place is the new connection's: closing the old one kept it.
    assert!(holder.unlock(&h).await.unwrap());
    let push = next_push(&mut pushes, "the grant on the new connection").await;
    assert_eq!(push, (2, "mover".to_owned(), PushEvent::Granted));
    assert!(moved.unlock(&m).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_poller_keeps_its_turn_against_a_later_push_waiter() {
    let dir = Scratch::new("net-waiting-poller");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr.to_string();
    let (holder, pusher) = (connect(&server).await, connect(&server).await);
    let h = args("holder", "z");
    assert!(holder.lock(&h).await.unwrap());

    // A version-2 client polls first; the server remembers its turn.
    let (mut poller, welcome) = authenticate(&addr, TOKEN).await.unwrap();
    assert_eq!(&welcome[..2], &[0, 2]);
    let poll = |id: u64, uid: &str| lock_request(id, OP_LOCK, uid, &["z"]);
    assert_eq!(
        roundtrip(&mut poller, &poll(1, "p1")).await,
        [1, REPLY_BOOL, 0]
    );

    // A push waiter comes later.
    let (wake, mut pushes) = sink(0);
    let w = args("pusher", "z");
    let reply = pusher
        .lock_wait(&w, LockMode::Write, &waiting(Ticket::now(), &wake))
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));
    // The poller's next round (a new uid, as version-2 clients do) renews
    // its turn.
    assert_eq!(
        roundtrip(&mut poller, &poll(2, "p2")).await,
        [2, REPLY_BOOL, 0]
    );

    // The holder leaves: the push waiter does not overtake the poller.
    assert!(holder.unlock(&h).await.unwrap());
    no_push(
        &mut pushes,
        Duration::from_millis(300),
        "the poller is first in line",
    )
    .await;
    assert_eq!(
        roundtrip(&mut poller, &poll(3, "p3")).await,
        [3, REPLY_BOOL, 1]
    );

    // When the poller is done, the push waiter is next.
    let unlock = lock_request(4, OP_UNLOCK, "p3", &["z"]);
    assert_eq!(roundtrip(&mut poller, &unlock).await, [4, REPLY_BOOL, 1]);
    let push = next_push(&mut pushes, "the grant after the poller").await;
    assert_eq!(push, (0, "pusher".to_owned(), PushEvent::Granted));
    assert!(pusher.unlock(&w).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_increase_across_holders_and_server_restarts() {
    let dir = Scratch::new("net-waiting-fence");
    let mut server = Server::start(&dir, &["--no-quarantine"]);
    let addr = server.addr;
    let locker = connect(&server).await;
    let fence = |uid: &'static str, name: &'static str, mode: LockMode, floor: u64| {
        let locker = &locker;
        async move { locker.fence(&args(uid, name), mode, floor).await }
    };

    let mut seen = Vec::new();
    assert!(locker.lock(&args("a", "f")).await.unwrap());
    seen.push(
        fence("a", "f", LockMode::Write, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    seen.push(
        fence("a", "f", LockMode::Write, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    assert_eq!(
        fence("nobody", "f", LockMode::Write, 0).await,
        Ok(None),
        "a uid that does not hold the lock gets no token"
    );
    assert!(locker.unlock(&args("a", "f")).await.unwrap());
    assert_eq!(
        fence("a", "f", LockMode::Write, 0).await,
        Ok(None),
        "released"
    );

    assert!(locker.lock(&args("b", "f")).await.unwrap());
    seen.push(
        fence("b", "f", LockMode::Write, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    let floor = seen[seen.len() - 1] + 1_000_000;
    let raised = fence("b", "f", LockMode::Write, floor)
        .await
        .unwrap()
        .expect("held");
    assert!(raised >= floor, "{raised} < floor {floor}");
    seen.push(raised);
    assert!(locker.unlock(&args("b", "f")).await.unwrap());

    // Readers share the lock, and each draws its own, larger token.
    assert!(locker.rlock(&args("r1", "f")).await.unwrap());
    assert!(locker.rlock(&args("r2", "f")).await.unwrap());
    seen.push(
        fence("r1", "f", LockMode::Read, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    seen.push(
        fence("r2", "f", LockMode::Read, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    assert!(locker.runlock(&args("r1", "f")).await.unwrap());
    assert!(locker.runlock(&args("r2", "f")).await.unwrap());

    // The server dies and comes back on the same port, without its table.
    server.kill();
    let _server = Server::restart_at(&dir, addr, &["--no-quarantine"]);
    let mut granted = false;
    for _ in 0..100 {
        match locker.lock(&args("c", "f")).await {
            Ok(true) => {
                granted = true;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(granted, "no grant after the restart");
    seen.push(
        fence("c", "f", LockMode::Write, 0)
            .await
            .unwrap()
            .expect("held"),
    );
    assert!(locker.unlock(&args("c", "f")).await.unwrap());

    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "tokens must strictly increase: {seen:?}"
    );
}
