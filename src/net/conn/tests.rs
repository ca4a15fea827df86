//! A client connection against scripted servers: batching, replies by
//! id, pushes, and what a closed or silent server leaves behind.

use std::sync::atomic::AtomicUsize;

use tokio::sync::mpsc;

use crate::locker::wait::{PushEvent, PushSink, Wake};
use crate::net::wire::Response;

use super::*;

/// Counts how often a connection told its owner it went down.
fn counter() -> (Arc<AtomicUsize>, OnClose) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let on_close = Box::new(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    (count, on_close)
}

/// A started connection over an in-memory pipe, and the server's end.
fn piped() -> (
    Arc<Connection>,
    Framed<tokio::io::DuplexStream, LengthDelimitedCodec>,
    Arc<AtomicUsize>,
) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let transport = Framed::new(Box::new(client) as BoxIo, wire::codec());
    let (closed, on_close) = counter();
    let conn = Connection::start(
        "pipe",
        Link {
            transport,
            closer: None,
        },
        on_close,
        Duration::from_secs(60),
        wire::PROTOCOL_VERSION,
        Arc::default(),
        Arc::default(),
    );
    (conn, Framed::new(server, wire::codec()), closed)
}

/// Hands every push it is given to a channel the test reads.
struct Forward(mpsc::UnboundedSender<(usize, String, PushEvent)>);

impl PushSink for Forward {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        let _ = self.0.send((slot, uid.to_owned(), event));
    }
}

/// A started connection over `transport` whose pushes for uid
/// `waiting` reach the returned channel, tagged with slot 3.
fn with_waiter(
    transport: Transport,
) -> (
    Arc<Connection>,
    mpsc::UnboundedReceiver<(usize, String, PushEvent)>,
) {
    let pushes = Arc::new(Pushes::default());
    let (tx, woken) = mpsc::unbounded_channel();
    pushes.register(&"waiting".into(), &Wake::new(Arc::new(Forward(tx)), 3));
    let (_, on_close) = counter();
    let conn = Connection::start(
        "pipe",
        Link {
            transport,
            closer: None,
        },
        on_close,
        Duration::from_secs(60),
        wire::PROTOCOL_VERSION,
        pushes,
        Arc::default(),
    );
    (conn, woken)
}

async fn settle(conn: &Connection) {
    for _ in 0..100 {
        if !conn.is_alive() {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn an_aborted_writer_marks_the_connection_down_and_stops_the_reader() {
    let (conn, mut server, closed) = piped();
    let writer = conn.tasks()[0].clone();
    writer.abort();
    settle(&conn).await;
    assert!(!conn.is_alive());
    assert_eq!(closed.load(Ordering::SeqCst), 1);
    // The reader was aborted too, so the server sees the pipe close.
    let end = tokio::time::timeout(Duration::from_secs(5), server.next()).await;
    assert!(matches!(end, Ok(None)), "the pipe stayed open");
    // Later calls fail at once and do not report the close again.
    let result = conn.call(2, Op::Health, Duration::from_secs(5)).await;
    assert!(
        matches!(result, Err(Error::LockerUnavailable { .. })),
        "{result:?}"
    );
    assert_eq!(closed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn frames_appended_together_reach_the_server_once_and_replies_their_callers() {
    let (conn, mut server, _closed) = piped();
    let calls = (1..=50u64).map(|id| {
        let conn = conn.clone();
        tokio::spawn(async move { conn.call(id, Op::Health, Duration::from_secs(5)).await })
    });
    let calls: Vec<_> = calls.collect();
    let mut seen = Vec::new();
    while seen.len() < 50 {
        let frame = server.next().await.expect("a frame").expect("framed");
        let request: Request = wire::decode(&frame).expect("decodes");
        seen.push(request.id);
        let response = Response {
            id: request.id,
            reply: Reply::Bool(request.id.is_multiple_of(2)),
        };
        server
            .send(Bytes::from(wire::encode(&response).unwrap()))
            .await
            .unwrap();
    }
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=50).collect::<Vec<_>>(), "every frame, once");
    for (id, call) in (1..=50u64).zip(calls) {
        let reply = call.await.expect("joins").expect("answered");
        assert_eq!(
            reply,
            Reply::Bool(id % 2 == 0),
            "call {id} got another's reply"
        );
    }
}

/// A reply that reached its slot stays there for its call when the
/// connection goes down before the call looks, and the calls still
/// waiting then fail at once, as closed.
#[tokio::test]
async fn a_reply_read_before_the_connection_went_down_still_reaches_its_call() {
    let (conn, mut server, closed) = piped();
    let mut answered = Box::pin(conn.call(7, Op::Health, Duration::from_secs(30)));
    let mut unanswered = Box::pin(conn.call(8, Op::Health, Duration::from_secs(30)));
    assert!(futures::poll!(answered.as_mut()).is_pending());
    assert!(futures::poll!(unanswered.as_mut()).is_pending());
    for _ in 0..2 {
        let frame = server.next().await.expect("a frame").expect("framed");
        let request: Request = wire::decode(&frame).expect("decodes");
        if request.id == 7 {
            let response = Response {
                id: 7,
                reply: Reply::Bool(true),
            };
            server
                .send(Bytes::from(wire::encode(&response).unwrap()))
                .await
                .unwrap();
        }
    }
    drop(server);
    settle(&conn).await;
    assert!(!conn.is_alive());
    assert_eq!(closed.load(Ordering::SeqCst), 1);
    assert_eq!(answered.await.expect("the reply came"), Reply::Bool(true));
    let failed = tokio::time::timeout(Duration::from_secs(5), unanswered)
        .await
        .expect("a waiting call fails as the connection goes down");
    assert!(
        matches!(&failed, Err(Error::LockerUnavailable { reason, .. }) if reason == CLOSED_BEFORE_THE_REPLY),
        "{failed:?}"
    );
}

#[tokio::test]
async fn pushes_reach_their_wait_and_responses_their_call_on_one_connection() {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let transport = Framed::new(Box::new(client) as BoxIo, wire::codec());
    let (conn, mut woken) = with_waiter(transport);
    let mut server = Framed::new(server, wire::codec());
    let serve = async {
        let request = server.next().await.expect("a request").expect("a frame");
        let request: Request = wire::decode(&request).expect("decodes");
        // A push for an unknown uid, one for the waiting uid, then the
        // response, all unsolicited but the last.
        for uid in ["unknown", "waiting"] {
            let push = Response {
                id: wire::UNSOLICITED,
                reply: Reply::Push {
                    uid: uid.into(),
                    event: wire::WirePushEvent::Granted,
                },
            };
            server
                .send(Bytes::from(wire::encode(&push).unwrap()))
                .await
                .unwrap();
        }
        let response = Response {
            id: request.id,
            reply: Reply::Bool(true),
        };
        server
            .send(Bytes::from(wire::encode(&response).unwrap()))
            .await
            .unwrap();
    };
    let (reply, ()) = tokio::join!(conn.call(1, Op::Health, Duration::from_secs(5)), serve);
    assert_eq!(reply.unwrap(), Reply::Bool(true));
    assert_eq!(
        woken.recv().await,
        Some((3, "waiting".to_owned(), PushEvent::Granted))
    );
    assert!(woken.try_recv().is_err(), "the unknown uid woke nobody");
    assert!(conn.is_alive());
}

#[tokio::test]
async fn frames_read_together_with_the_welcome_are_handled_without_more_input() {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let mut server = Framed::new(server, wire::codec());
    let mut transport = Framed::new(Box::new(client) as BoxIo, wire::codec());
    // A welcome and a push in one write, so the client reads both at once.
    let welcome = Response {
        id: 7,
        reply: Reply::Bool(true),
    };
    let push = Response {
        id: wire::UNSOLICITED,
        reply: Reply::Push {
            uid: "waiting".into(),
            event: wire::WirePushEvent::Granted,
        },
    };
    for message in [&welcome, &push] {
        server
            .feed(Bytes::from(wire::encode(message).unwrap()))
            .await
            .unwrap();
    }
    SinkExt::<Bytes>::flush(&mut server).await.unwrap();
    let first = transport.next().await.expect("a frame").expect("framed");
    assert_eq!(wire::decode::<Response>(&first).unwrap(), welcome);
    assert!(
        !transport.read_buffer().is_empty(),
        "the push was read with the welcome"
    );
    let (_conn, mut woken) = with_waiter(transport);
    // The server sends nothing more: the push must come from what was read.
    let woken = tokio::time::timeout(Duration::from_secs(5), woken.recv()).await;
    assert_eq!(
        woken.expect("delivered without more input"),
        Some((3, "waiting".to_owned(), PushEvent::Granted))
    );
    drop(server);
}

#[tokio::test]
async fn a_closed_socket_marks_the_connection_down() {
    let (conn, server, closed) = piped();
    drop(server);
    settle(&conn).await;
    assert!(!conn.is_alive());
    assert_eq!(closed.load(Ordering::SeqCst), 1);
}

#[test]
fn tasks_dropped_with_their_runtime_mark_the_connection_down() {
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (conn, server, closed) = first.block_on(async { piped() });
    assert!(conn.is_alive());
    drop(first);
    assert!(
        !conn.is_alive(),
        "the tasks are gone but the connection looks alive"
    );
    assert_eq!(closed.load(Ordering::SeqCst), 1);

    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result = second.block_on(conn.call(1, Op::Health, Duration::from_secs(5)));
    assert!(
        matches!(result, Err(Error::LockerUnavailable { .. })),
        "{result:?}"
    );
    drop(server);
}

#[test]
fn a_call_whose_writer_never_runs_marks_the_connection_down() {
    // Alive but never driven again: its tasks never run.
    let idle = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (conn, server, closed) = idle.block_on(async { piped() });
    let caller = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let result = caller.block_on(conn.call(1, Op::Health, Duration::from_secs(5)));
    match result {
        Err(Error::LockerUnavailable { reason, .. }) => {
            assert!(reason.contains("not running its tasks"), "{reason}");
        }
        other => panic!("expected LockerUnavailable, got {other:?}"),
    }
    assert!(!conn.is_alive());
    assert_eq!(closed.load(Ordering::SeqCst), 1);
    drop(server);
}
