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

/// Reads the request ids the server end receives, `n` of them.
async fn read_ids(
    server: &mut Framed<tokio::io::DuplexStream, LengthDelimitedCodec>,
    n: usize,
) -> Vec<u64> {
    let mut ids = Vec::new();
    while ids.len() < n {
        let frame = server.next().await.expect("a frame").expect("framed");
        let request: Request = wire::decode(&frame).expect("decodes");
        ids.push(request.id);
    }
    ids
}

async fn answer(
    server: &mut Framed<tokio::io::DuplexStream, LengthDelimitedCodec>,
    id: u64,
    value: bool,
) {
    let response = Response {
        id,
        reply: Reply::Bool(value),
    };
    server
        .send(Bytes::from(wire::encode(&response).unwrap()))
        .await
        .unwrap();
}

/// Calls that time out, are dropped before or after their reply came, or
/// are dropped after the connection went down with their reply in the
/// slot, leave no slot behind.
#[tokio::test(start_paused = true)]
async fn no_reply_slot_outlives_its_call() {
    let (conn, mut server, _closed) = piped();
    // Timed out: no reply ever.
    let timed_out = conn.call(1, Op::Health, Duration::from_millis(50)).await;
    assert!(
        matches!(timed_out, Err(Error::LockerTimeout { .. })),
        "{timed_out:?}"
    );
    // Dropped while waiting, then answered late.
    let mut dropped = Box::pin(conn.call(2, Op::Health, Duration::from_secs(30)));
    assert!(futures::poll!(dropped.as_mut()).is_pending());
    drop(dropped);
    // Answered, then dropped without looking.
    let mut unseen = Box::pin(conn.call(3, Op::Health, Duration::from_secs(30)));
    assert!(futures::poll!(unseen.as_mut()).is_pending());
    assert_eq!(read_ids(&mut server, 3).await, vec![1, 2, 3]);
    answer(&mut server, 2, true).await;
    answer(&mut server, 3, true).await;
    answer(&mut server, 1, true).await;
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    drop(unseen);
    assert_eq!(conn.replies.len(), 0, "slots left behind");
    // Answered, down, then dropped: the kept slot goes with its call.
    let mut kept = Box::pin(conn.call(4, Op::Health, Duration::from_secs(30)));
    assert!(futures::poll!(kept.as_mut()).is_pending());
    assert_eq!(read_ids(&mut server, 1).await, vec![4]);
    answer(&mut server, 4, false).await;
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    conn.close();
    assert_eq!(conn.replies.len(), 1, "the answered slot is kept");
    drop(kept);
    assert_eq!(conn.replies.len(), 0, "slots left behind");
    // After down, a new call fails at once and leaves nothing.
    let late = conn.call(5, Op::Health, Duration::from_secs(30)).await;
    assert!(
        matches!(late, Err(Error::LockerUnavailable { .. })),
        "{late:?}"
    );
    assert_eq!(conn.replies.len(), 0);
}

/// A waker that counts its wakes.
struct CountWake(AtomicUsize);
impl std::task::Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A call polled by one task then moved to another is woken on the second
/// when its reply comes, and when the connection goes down.
#[tokio::test]
async fn a_call_moved_to_another_task_is_woken_where_it_now_waits() {
    use std::future::Future as _;
    for go_down in [false, true] {
        let (conn, mut server, _closed) = piped();
        let mut call = Box::pin(conn.call(9, Op::Health, Duration::from_secs(30)));
        let first = Arc::new(CountWake(AtomicUsize::new(0)));
        let second = Arc::new(CountWake(AtomicUsize::new(0)));
        let w1 = std::task::Waker::from(first.clone());
        let w2 = std::task::Waker::from(second.clone());
        assert!(call
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&w1))
            .is_pending());
        assert!(call
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&w2))
            .is_pending());
        assert_eq!(read_ids(&mut server, 1).await, vec![9]);
        if go_down {
            conn.close();
        } else {
            answer(&mut server, 9, true).await;
            for _ in 0..100 {
                if second.0.load(Ordering::SeqCst) > 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(first.0.load(Ordering::SeqCst), 0, "the old task was woken");
        assert_eq!(
            second.0.load(Ordering::SeqCst),
            1,
            "the new task was not woken"
        );
        let out = call.as_mut().poll(&mut std::task::Context::from_waker(&w2));
        match (go_down, out) {
            (false, std::task::Poll::Ready(Ok(Reply::Bool(true)))) => {}
            (true, std::task::Poll::Ready(Err(Error::LockerUnavailable { reason, .. })))
                if reason == CLOSED_BEFORE_THE_REPLY => {}
            (_, other) => panic!("go_down {go_down}: {other:?}"),
        }
        assert_eq!(conn.replies.len(), 0);
    }
}

/// Many calls racing with `down` on a multi-thread runtime: each either
/// gets its reply or fails at once as closed (none waits for its
/// timeout), no reply reaches another call, and no slot is left.
#[test]
fn calls_racing_with_the_connections_end_end_at_once_with_their_own_reply_or_closed() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    for round in 0..30u64 {
        runtime.block_on(async {
            let (conn, mut server, _closed) = piped();
            let calls: Vec<_> = (1..=40u64)
                .map(|id| {
                    let conn = conn.clone();
                    tokio::spawn(async move {
                        (id, conn.call(id, Op::Health, Duration::from_secs(60)).await)
                    })
                })
                .collect();
            let serve = tokio::spawn(async move {
                let mut n = 0;
                while let Some(Ok(frame)) = server.next().await {
                    let request: Request = wire::decode(&frame).expect("decodes");
                    answer(&mut server, request.id, request.id.is_multiple_of(3)).await;
                    n += 1;
                    if n == 5 + round % 20 {
                        break;
                    }
                }
                server
            });
            // Down from elsewhere, after a few replies.
            let closer = {
                let conn = conn.clone();
                tokio::spawn(async move {
                    for _ in 0..(round % 7) {
                        tokio::task::yield_now().await;
                    }
                    conn.close();
                })
            };
            let ended = tokio::time::timeout(Duration::from_secs(10), async {
                let mut out = Vec::new();
                for call in calls {
                    out.push(call.await.unwrap());
                }
                out
            })
            .await
            .expect("a call waited although the connection went down");
            closer.await.unwrap();
            drop(serve);
            for (id, result) in ended {
                match result {
                    Ok(Reply::Bool(b)) => {
                        assert_eq!(b, id.is_multiple_of(3), "call {id}: another's reply")
                    }
                    Err(Error::LockerUnavailable { .. }) => {}
                    other => panic!("call {id}: {other:?}"),
                }
            }
            assert_eq!(conn.replies.len(), 0, "round {round}: slots left");
        });
    }
}
