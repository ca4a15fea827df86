//! docs/lock-servers.md, "Limits and memory": "A connection may hold at
//! most 1024 places in line; beyond that a waiter gets an error saying
//! so." A connection whose only place was granted (its push read) holds no
//! place, so its next wait fits under a limit of one.
//!
//! Connection A keeps a place for uid U0 (ticket T) on "x" and 999 other
//! names, behind which Q waits on the 999. A then waits under a new uid U
//! with the same ticket T for "x" alone, while H releases "x" (which it
//! holds) at the same moment. The table queues U on "x" and ends U0's
//! places on the other 999 names, whose lines it then promotes, one name
//! at a time, on A's thread (granting Q); meanwhile H's release grants U's
//! place on "x", and its push notes the count of places A recorded, which
//! does not count U's place yet (A records it once its table call
//! returns). A takes the grant for one of an older place of U
//! (`end_granted_place`) and keeps the record of the place the table
//! granted. A, holding no place, is refused its next wait under a limit of
//! one place until that record expires.
//! Real time (sockets); at most 100 rounds and 20 s (the break showed
//! within a few rounds; 300 rounds took 15 s alone and a minute of CPU
//! beside the other tests of this program).
#![cfg(feature = "net")]

use std::time::Duration;

use crate::connections::authenticated;
use crate::node::{start, TOKEN};
use crate::wire::{
    frame, lock_request, lock_wait_request, read_frame, read_varint, response, OP_LOCK, OP_UNLOCK,
    QUEUED, REPLY_BOOL, REPLY_PUSH, REPLY_WAIT,
};
use quorum_lock::net::ServerConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Reads frames until the reply to `id`; returns it and the uids of the
/// pushes read before it.
async fn reply(stream: &mut TcpStream, id: u64) -> (Vec<u8>, Vec<String>) {
    let mut pushed = Vec::new();
    for _ in 0..64 {
        let frame = tokio::time::timeout(Duration::from_secs(5), read_frame(stream, 64 * 1024))
            .await
            .expect("a frame within 5 s")
            .unwrap();
        let (got, body) = response(&frame);
        if got == 0 && body.first() == Some(&REPLY_PUSH) {
            let (len, rest) = read_varint(&body[1..]).unwrap();
            pushed.push(String::from_utf8_lossy(&rest[..len as usize]).into_owned());
            continue;
        }
        assert_eq!(got, id);
        return (body.to_vec(), pushed);
    }
    panic!("no reply to {id} within 64 frames");
}

async fn send(stream: &mut TcpStream, payload: &[u8]) {
    stream.write_all(&frame(payload)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_granted_as_it_is_recorded_stops_counting_once_its_grant_is_pushed() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_waiters_per_connection = 1;
    config.idle_timeout = None;
    let node = start(config).await;
    let [mut a, mut h, mut q] = authenticated(&node).await;
    let ttl = Duration::from_secs(60);
    let started = tokio::time::Instant::now();
    let (mut granted_after_queueing, mut rounds) = (0, 0);
    for round in 0..100u64 {
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
        rounds += 1;
        let (holder, old, uid) = (
            format!("h{round}"),
            format!("U0-{round}"),
            format!("U{round}"),
        );
        let (queuer, probe) = (format!("Q{round}"), format!("W{round}"));
        let others: Vec<String> = (0..999).map(|i| format!("r{round}n{i}")).collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let mut wide = vec!["x"];
        wide.extend(&others);
        let ticket = (2 * round + 1, 1);
        let id = 10 + 100 * round;
        send(&mut h, &lock_request(id, OP_LOCK, &holder, &["x"])).await;
        assert_eq!(reply(&mut h, id).await.0, [REPLY_BOOL, 1]);
        send(
            &mut a,
            &lock_wait_request(id, &old, &wide, ticket, ttl, true),
        )
        .await;
        assert_eq!(reply(&mut a, id).await.0, [REPLY_WAIT, QUEUED]);
        let later = (2 * round + 2, 1);
        send(
            &mut q,
            &lock_wait_request(id, &queuer, &others, later, ttl, true),
        )
        .await;
        assert_eq!(reply(&mut q, id).await.0, [REPLY_WAIT, QUEUED]);
        // The race: U's wait on A, H's release right behind it.
        send(
            &mut a,
            &lock_wait_request(id + 1, &uid, &["x"], ticket, ttl, true),
        )
        .await;
        for _ in 0..(round % 10) * 200 {
            std::hint::spin_loop();
        }
        send(&mut h, &lock_request(id + 1, OP_UNLOCK, &holder, &["x"])).await;
        let (answer, mut pushed) = reply(&mut a, id + 1).await;
        assert_eq!(reply(&mut h, id + 1).await.0, [REPLY_BOOL, 1]);
        let queued = answer == [REPLY_WAIT, QUEUED];
        let u_holds = || {
            node.locker
                .snapshot()
                .iter()
                .any(|e| e.uid == uid && e.resource == "x")
        };
        // U's grant, if its place was granted, is pushed: read it.
        if queued {
            for _ in 0..100 {
                if u_holds() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        // A no-op request flushes the pushes queued before its reply.
        send(
            &mut a,
            &lock_request(id + 2, OP_UNLOCK, "nobody", &["nothing"]),
        )
        .await;
        pushed.extend(reply(&mut a, id + 2).await.1);
        let granted = queued && u_holds() && pushed.contains(&uid);
        if granted {
            granted_after_queueing += 1;
            send(
                &mut a,
                &lock_wait_request(id + 3, &probe, &["x"], (1 << 40 | round, 1), ttl, true),
            )
            .await;
            let (body, _) = reply(&mut a, id + 3).await;
            assert_eq!(
                body.first(),
                Some(&REPLY_WAIT),
                "round {round}: U's place was granted and its push read, A keeps no other \
                 place ({} places in the table), yet A's wait for another uid is refused under a \
                 limit of one place: {}",
                node.locker.waiting(),
                String::from_utf8_lossy(&body)
            );
            send(&mut a, &lock_request(id + 4, OP_UNLOCK, &probe, &["x"])).await;
            reply(&mut a, id + 4).await;
        }
        // Clean up whatever this round left.
        send(&mut a, &lock_request(id + 5, OP_UNLOCK, &uid, &["x"])).await;
        reply(&mut a, id + 5).await;
        send(&mut a, &lock_request(id + 6, OP_UNLOCK, &old, &wide)).await;
        reply(&mut a, id + 6).await;
        send(&mut q, &lock_request(id + 7, OP_UNLOCK, &queuer, &others)).await;
        reply(&mut q, id + 7).await;
    }
    eprintln!(
        "{granted_after_queueing} of {rounds} waits granted after they queued; none left a record"
    );
}
