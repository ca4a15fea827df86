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

/// "holder" holds x on `locker`, and "waiter" (ticket 1) waits for
/// `names` behind it, its wake-ups collected in the returned sink.
async fn queued_behind_a_holder(
    locker: &SqlLocker,
    names: &[&str],
    prefix: &str,
) -> (Arc<Events>, quorum_lock::LockArgs) {
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
    let waiter = args_of("waiter", "waiter", names);
    let reply = locker
        .lock_wait(&waiter, LockMode::Write, &wait)
        .await
        .unwrap();
    assert_eq!(reply, WaitReply::Queued, "{prefix}: the holder holds x");
    (sink, waiter)
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
        let (sink, waiter) = queued_behind_a_holder(&locker, &["x"], prefix).await;
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

/// A release in a quarantine that began under the waiter (the table's
/// epoch marker gone: the database may have forgotten grants) hands it
/// nothing, as its own turn would grant it nothing: no grant is pushed and
/// the waiter holds nothing, on either database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_in_quarantine_hands_the_waiter_nothing() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for (url, prefix) in [(&servers.pg, "hq_pg_"), (&servers.maria, "hq_my_")] {
        let locker = crate::sql_shared::guarded_locker(url, prefix).await;
        crate::sql_shared::past_quarantine(&locker).await;
        let (sink, _waiter) = queued_behind_a_holder(&locker, &["x"], prefix).await;
        servers
            .run(url, format!("DELETE FROM {prefix}entries WHERE kind = 'e'"))
            .await;
        assert!(locker
            .unlock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        assert!(
            locker.quarantine_left().await.unwrap().is_some(),
            "{prefix}: control: the release began a quarantine"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            *sink.0.lock().unwrap(),
            [],
            "{prefix}: nothing granted in quarantine"
        );
        assert!(
            locker
                .locks()
                .await
                .unwrap()
                .iter()
                .all(|l| l.resource != "x"),
            "{prefix}: the waiter holds nothing"
        );
    }
}

/// Readers in line behind a writer are all granted by the writer's
/// release, in one transaction, and share the name; the writer behind them
/// stays in line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_in_line_are_handed_the_name_together_and_the_writer_behind_them_waits() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for (url, prefix) in [(&servers.pg, "hr_pg_"), (&servers.maria, "hr_my_")] {
        let locker = SqlLocker::connect(url, config(prefix))
            .await
            .expect("connect");
        assert!(locker
            .lock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        let sink = Arc::new(Events::default());
        let queue = |uid: &'static str, at: u64, mode: LockMode| {
            let wait = WaitArgs {
                ticket: Ticket { at, tiebreak: 1 },
                place_ttl: Duration::from_secs(30),
                wake: Some(Wake::new(sink.clone(), 0)),
            };
            let locker = &locker;
            async move {
                let reply = locker
                    .lock_wait(&args_of(uid, uid, &["x"]), mode, &wait)
                    .await
                    .unwrap();
                assert_eq!(reply, WaitReply::Queued, "{uid} waits");
            }
        };
        queue("r1", 1, LockMode::Read).await;
        queue("r2", 2, LockMode::Read).await;
        queue("w", 3, LockMode::Write).await;
        assert!(locker
            .unlock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        let mut told = sink.0.lock().unwrap().clone();
        told.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            told,
            [
                ("r1".to_owned(), PushEvent::Granted),
                ("r2".to_owned(), PushEvent::Granted)
            ],
            "{prefix}: both readers handed the name by the release, the writer not"
        );
        let mut holders: Vec<(String, LockMode)> = locker
            .locks()
            .await
            .unwrap()
            .into_iter()
            .filter(|l| l.resource == "x")
            .map(|l| (l.uid, l.mode))
            .collect();
        holders.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            holders,
            [
                ("r1".to_owned(), LockMode::Read),
                ("r2".to_owned(), LockMode::Read)
            ],
            "{prefix}"
        );
    }
}

/// A waiter on two names is not granted by a release of one of them, which
/// reads only that name's rows: its own turn grants it both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_two_names_takes_its_own_turn_for_both() {
    let Some(servers) = Servers::start() else {
        return;
    };
    for (url, prefix) in [(&servers.pg, "h2_pg_"), (&servers.maria, "h2_my_")] {
        let locker = SqlLocker::connect(url, config(prefix))
            .await
            .expect("connect");
        let (sink, _waiter) = queued_behind_a_holder(&locker, &["x", "y"], prefix).await;
        assert!(locker
            .unlock(&args_of("holder", "holder", &["x"]))
            .await
            .unwrap());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while sink.0.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            *sink.0.lock().unwrap(),
            [("waiter".to_owned(), PushEvent::Granted)],
            "{prefix}: the waiter's own turn granted it within 3 s"
        );
        let mut held: Vec<String> = locker
            .locks()
            .await
            .unwrap()
            .into_iter()
            .filter(|l| l.uid == "waiter")
            .map(|l| l.resource)
            .collect();
        held.sort();
        assert_eq!(held, ["x", "y"], "{prefix}: it holds both names");
    }
}
