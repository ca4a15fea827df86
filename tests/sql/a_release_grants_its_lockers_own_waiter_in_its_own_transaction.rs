//! A release that makes it the turn of a waiter of its own locker grants
//! that waiter in the release's own transaction (`Shared::hand_on`), as the
//! waiter's turn-taking call would have a moment later: one transaction
//! per hand-off instead of two.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake};

use crate::sql_shared::{args_of, config};
use crate::Servers;

#[derive(Default)]
struct Events(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Events {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0.lock().unwrap().push((uid.to_owned(), event));
    }
}

/// The waiter is told of its grant before the release returns (a turn
/// taken by a call of its own would be told later, from the locker's
/// background task), and holds under its own owner and source, not those
/// of the call that wrote its row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiter_is_told_before_the_release_returns_and_holds_under_its_own_name() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for (url, prefix) in [(&servers.pg, "ho_pg_"), (&servers.maria, "ho_my_")] {
        let locker = SqlLocker::connect(url, config(prefix))
            .await
            .expect("connect");
        assert!(locker
            .lock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        let sink = Arc::new(Events::default());
        let wait = WaitArgs {
            ticket: Ticket { at: 1, tiebreak: 1 },
            place_ttl: Duration::from_secs(30),
            wake: Some(Wake::new(sink.clone(), 0)),
        };
        let waiter = args_of("waiter", "waiter", &["x"]);
        let reply = locker
            .lock_wait(&waiter, LockMode::Write, &wait)
            .await
            .unwrap();
        assert_eq!(reply, WaitReply::Queued, "{prefix}: the holder holds x");
        assert!(locker
            .unlock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        let told = sink.0.lock().unwrap().clone();
        assert_eq!(
            told,
            [("waiter".to_owned(), PushEvent::Granted)],
            "{prefix}: the release hands the waiter its grant before it returns"
        );
        let listed = locker.locks().await.unwrap();
        let x: Vec<_> = listed.iter().filter(|l| l.resource == "x").collect();
        assert_eq!(x.len(), 1, "{prefix}: one holder of x: {listed:?}");
        assert_eq!(
            (x[0].uid.as_str(), x[0].owner.as_str(), x[0].source.as_str()),
            ("waiter", "waiter", &*waiter.source),
            "{prefix}: the waiter holds x under its own owner and source"
        );
        assert_eq!(x[0].mode, LockMode::Write);
        // The grant counts as the waiter's: its unlock frees x.
        assert!(locker.unlock(&waiter).await.unwrap());
        assert!(locker
            .locks()
            .await
            .unwrap()
            .iter()
            .all(|l| l.resource != "x"));
    }
}
