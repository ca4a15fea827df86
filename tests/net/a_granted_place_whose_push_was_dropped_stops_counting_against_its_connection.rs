//! PROTOCOL.md: "Pushes are best effort: when a connection does not read,
//! at most 256 wait in the server's queue and later ones are dropped; a
//! waiter learns of its grant when it repeats its `LockWait`", and "Each
//! connection may hold at most `max_waiters_per_connection` places ...,
//! counting places until they are granted, released, or past their
//! `place_ttl`." docs/lock-servers.md, "Limits and memory": "A connection
//! may hold at most 1024 places in line; beyond that a waiter gets an
//! error saying so", and "A place granted later (its grant pushed) ends
//! itself only".
//!
//! H holds "x". Over connection A (max_waiters_per_connection 300) 300
//! uids wait to read "x" (pushed waits, place_ttl 60 s). A's client then
//! stops reading while it floods Health requests (whole frames, from a
//! task of its own), until the server is stuck writing to it. H releases "x": the table grants all 300 places at
//! once and pushes 300 grants to A, whose queue takes 256 and drops 44.
//! A's client reads again. The table keeps no place at all, but A's
//! session ends a place's record only when it forwards its grant
//! (`Session::forward` -> `end_granted_place`): the 44 places whose push
//! was dropped stay counted against A until their place_ttl (a minute), so
//! A's next 300 waits (for new uids, on "y", which H holds) are refused
//! past the 256th with "too many queued waiters on this connection", while
//! the table keeps 256 places of A, fewer than its limit.
//! Real time (sockets), every call and loop bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    call, frame, lock_request, read_frame, read_wait_request, request, response, OP_HEALTH,
    OP_LOCK, OP_UNLOCK, QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One frame's payload off `stream`.
async fn read_frame_of(stream: &mut tokio::net::tcp::OwnedReadHalf) -> std::io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await?;
    let mut payload = vec![0; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut payload).await?;
    Ok(payload)
}

const WAITERS: u64 = 300;

/// Every wait's place_ttl: a minute, longer than the test.
const PLACE_TTL: Duration = Duration::from_secs(60);

/// [`call`], reading past pushes (id 0) that come before the reply.
async fn call_skipping_pushes(
    stream: &mut tokio::net::TcpStream,
    id: u64,
    payload: &[u8],
) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("sent");
    for _ in 0..1_000 {
        let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
            .await
            .expect("answered in time")
            .expect("a reply");
        let (got, body) = response(&reply);
        if got == 0 {
            eprintln!("unsolicited: {body:?}");
            continue;
        }
        assert_eq!(got, id);
        return body.to_vec();
    }
    panic!("no reply to {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_place_whose_push_was_dropped_stops_counting_against_its_connection() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = WAITERS as usize;
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut h, mut a] = authenticated(&node).await;
    assert_eq!(
        call(&mut h, 1, &lock_request(1, OP_LOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut h, 2, &lock_request(2, OP_LOCK, "hy", &["y"])).await,
        [REPLY_BOOL, 1]
    );
    for i in 0..WAITERS {
        let uid = format!("r{i}");
        assert_eq!(
            call(
                &mut a,
                i + 1,
                &read_wait_request(i + 1, &uid, &["x"], (1, i + 1), PLACE_TTL, true)
            )
            .await,
            [REPLY_WAIT, QUEUED],
            "{uid} waits over A"
        );
    }
    assert_eq!(node.locker.waiting(), WAITERS as usize);

    // A stops reading: its session gets stuck writing Health replies. A
    // task of its own writes them, whole frames only, until told to stop.
    let batch: Vec<u8> = (1_000..11_000u64)
        .flat_map(|id| frame(&request(id, OP_HEALTH)))
        .collect();
    let (mut a_read, mut a_write) = a.into_split();
    let written = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (written, stop) = (written.clone(), stop.clone());
        tokio::spawn(async move {
            for _ in 0..2_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                a_write.write_all(&batch).await.expect("A takes requests");
                written.fetch_add(1, Ordering::SeqCst);
            }
            a_write
        })
    };
    let mut blocked = false;
    let mut seen = (usize::MAX, std::time::Instant::now());
    let flooding = std::time::Instant::now();
    while flooding.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = written.load(Ordering::SeqCst);
        if now != seen.0 {
            seen = (now, std::time::Instant::now());
        } else if seen.1.elapsed() >= Duration::from_millis(500) {
            blocked = true;
            break;
        }
    }
    assert!(
        blocked,
        "the server kept taking requests whose replies were not read"
    );

    // The release grants every reader at once.
    assert_eq!(
        call(&mut h, 3, &lock_request(3, OP_UNLOCK, "h", &["x"])).await,
        [REPLY_BOOL, 1]
    );
    let granted = || {
        node.locker
            .snapshot()
            .iter()
            .filter(|info| info.uid.starts_with('r'))
            .count()
    };
    for _ in 0..100 {
        if granted() == WAITERS as usize {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(granted(), WAITERS as usize, "every reader was granted");
    assert_eq!(node.locker.waiting(), 0, "the table keeps no place");

    // A reads again: every reply, and the pushes its queue kept.
    stop.store(true, Ordering::SeqCst);
    let mut pushes = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        match tokio::time::timeout(Duration::from_secs(1), read_frame_of(&mut a_read)).await {
            Ok(Ok(payload)) => {
                let (id, body) = response(&payload);
                if id == 0 && body.first() == Some(&REPLY_PUSH) {
                    pushes += 1;
                }
            }
            Ok(Err(err)) => panic!("A's connection broke: {err}"),
            Err(_) if writer.is_finished() => break,
            Err(_) => {}
        }
    }
    let a_write = writer.await.unwrap();
    let mut a = a_read.reunite(a_write).unwrap();
    eprintln!("A was pushed {pushes} grants of {WAITERS}");

    // A's next waits, for new uids: the table keeps none of A's places.
    let left = node.locker.waiting();
    let mut queued = 0;
    let mut refused = String::new();
    for i in 0..WAITERS {
        let uid = format!("w{i}");
        let id = 20_000 + i;
        let body = call_skipping_pushes(
            &mut a,
            id,
            &read_wait_request(id, &uid, &["y"], (2, i + 1), PLACE_TTL, true),
        )
        .await;
        if body == [REPLY_WAIT, QUEUED] {
            queued += 1;
        } else if refused.is_empty() {
            refused = String::from_utf8_lossy(&body).into_owned();
        }
    }
    assert_eq!(
        (left, queued),
        (0, WAITERS),
        "A was pushed {pushes} of the {WAITERS} grants (the rest dropped); with the table \
         keeping {left} places, A should have room for {WAITERS} waits, but only {queued} were \
         queued (the table now keeps {} places), the next refused: {refused}",
        node.locker.waiting()
    );
}
