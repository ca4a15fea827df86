//! A lock server expires an entry when it is due, not when the next call
//! happens to touch its name: the waiter behind a holder that died (it
//! stopped refreshing and sent nothing more) is pushed its grant once the
//! entry expires, although no client calls the server in between. The
//! exact moment (the entry's deadline, from the server's expiry timer) is
//! checked on paused time by `expire_due`'s unit test in `src/local`.
#![cfg(feature = "net")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{
    LocalLocker, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply,
    Wake,
};
use tokio::time::Instant;

use crate::lockers;
use crate::loopback;

const TOKEN: &str = "client-secret";
const VALIDITY: Duration = Duration::from_millis(800);

#[derive(Default)]
struct Inbox(Mutex<Vec<(String, PushEvent, Instant)>>);

impl PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0
            .lock()
            .unwrap()
            .push((uid.to_owned(), event, Instant::now()));
    }
}

fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec!["jobs".to_string()].into(),
        owner: "test".into(),
        source: "expiry.rs".into(),
        quorum: 1,
    }
}

#[tokio::test]
async fn a_waiter_is_granted_when_a_dead_holders_entry_expires() {
    let config = lockers::config_without_quarantine(VALIDITY);
    let server = LockServer::new(
        Arc::new(LocalLocker::with_config("node", config)),
        ServerConfig::new(TOKEN),
    )
    .expect("valid config");
    let (addr, serving) = loopback::serve_while_the_runtime_runs(server).await;
    let locker = RemoteLocker::connect(addr.to_string(), RemoteConfig::new(TOKEN))
        .await
        .expect("connect");

    // The holder locks once and is never heard of again.
    let granted = Instant::now();
    assert_eq!(locker.lock(&args("dead")).await, Ok(true));
    // A place lives at most a validity, as the entries it waits for: the
    // waiter lines up later, so that its place outlives the dead entry.
    tokio::time::sleep(VALIDITY / 2).await;
    let inbox = Arc::new(Inbox::default());
    let wait = WaitArgs {
        ticket: Ticket::now(),
        // The waiter does not ask again before the entry expires.
        place_ttl: Duration::from_secs(30),
        wake: Some(Wake::new(inbox.clone(), 0)),
    };
    let reply = locker
        .lock_wait(&args("waiter"), LockMode::Write, &wait)
        .await;
    assert_eq!(reply, Ok(WaitReply::Queued));

    let pushed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(at) = inbox
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|(uid, e, _)| uid == "waiter" && *e == PushEvent::Granted)
                .map(|(_, _, at)| *at)
            {
                return at;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the grant is pushed once the dead holder's entry expires, with no call to the server");
    assert!(
        pushed.duration_since(granted) >= VALIDITY,
        "granted after {:?}, before the holder's entry expired",
        pushed.duration_since(granted)
    );
    serving.abort();
}
