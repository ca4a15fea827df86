//! Reproduces a past break: a close whose places name at most 1,000 names is ended on the runtime serving clients, 1,000 passes over a long line in one go, and every other client waits for it.
#![cfg(feature = "net")]

use std::time::{Duration, Instant};

use crate::node::{args, remote, reservation, start, TOKEN};
use quorum_lock::net::{RemoteLocker, ServerConfig};
use quorum_lock::{LockMode, NetLocker, WaitReply};

/// Keeps `count` places on `held` over `client`, under uids `prefix-i`,
/// 50 requests in flight at a time.
async fn places_on(client: &RemoteLocker, prefix: &str, count: usize, held: &[String]) {
    for chunk in (0..count).collect::<Vec<_>>().chunks(50) {
        let waits = chunk.iter().map(|i| {
            let uid = format!("{prefix}-{i}");
            async move {
                client
                    .lock_wait(&args(&uid, held), LockMode::Write, &reservation())
                    .await
            }
        });
        for reply in futures::future::join_all(waits).await {
            assert_eq!(reply.unwrap(), WaitReply::Refused, "a reservation");
        }
    }
}

/// The slowest of `rounds` locks (and unlocks) of a name nobody else
/// uses, each bounded by 60 s.
async fn slowest_call(probe: &RemoteLocker, tag: &str, rounds: usize, pause: Duration) -> Duration {
    let mut slowest = Duration::ZERO;
    for round in 0..rounds {
        let free = vec![format!("free-{tag}-{round}")];
        let lock = args(&format!("probe-{tag}-{round}"), &free);
        let asked = Instant::now();
        let granted = tokio::time::timeout(Duration::from_secs(60), probe.lock(&lock))
            .await
            .expect("a lock within 60 s")
            .unwrap();
        slowest = slowest.max(asked.elapsed());
        assert!(granted);
        probe.unlock(&lock).await.unwrap();
        tokio::time::sleep(pause).await;
    }
    slowest
}

/// docs/guarantees.md: "Places naming up to 1,000 names together are
/// ended on the spot; more are ended on a thread of the server's own, so
/// that ending many places holds no other client up" (and the code: "as
/// cheap as one request's own work"). A server on one worker thread (what
/// tokio gives a one-CPU host). Twenty connections keep 1,000 places each on
/// one held name, a line of 20,000; a client with the client token keeps
/// 1,000 more places there, each naming that one name (1,000 names in
/// all: ended on the spot), and closes. Ending each place walks the whole
/// line, and the close ends all 1,000 in one go on the thread serving every
/// client: a probe's lock of a free name, which took at most `before`
/// while the line was built (each of those requests walked the line too),
/// waits for the whole clean-up. Bounded: each call 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_close_of_a_thousand_places_on_a_long_line_does_not_hold_other_clients_up() {
    let node = start(ServerConfig::new(TOKEN)).await;
    let holder = remote(&node).await;
    let held = vec!["held".to_string()];
    assert!(holder.lock(&args("holder", &held)).await.unwrap());
    let probe = remote(&node).await;
    let mut line = Vec::new();
    for conn in 0..20 {
        let client = remote(&node).await;
        places_on(&client, &format!("line{conn}"), 1000, &held).await;
        line.push(client);
    }
    // The hostile client's requests, each walking the line, beside probes.
    let hostile = remote(&node).await;
    let ((), before) = tokio::join!(
        places_on(&hostile, "hostile", 1000, &held),
        slowest_call(&probe, "before", 20, Duration::from_millis(1)),
    );
    assert_eq!(node.locker.waiting(), 21_000);
    drop(hostile);
    let during = slowest_call(&probe, "during", 20, Duration::from_millis(1)).await;
    assert!(
        during < before * 20 + Duration::from_millis(50),
        "a probe's lock of a free name took {during:?} while a closed connection's 1,000 places \
         on a line of 21,000 were ended on the spot, against {before:?} at most before"
    );
    drop(line);
    drop(holder);
}
