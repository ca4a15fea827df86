//! The background work of a `SqlLocker`, until it is dropped: polling the
//! lines of its waiters (MySQL) and the watched leaders, listening for
//! `NOTIFY` (PostgreSQL), taking a waiter's turn, and sweeping expired
//! rows no call deleted. Every task holds the locker weakly and ends when
//! it is gone.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::dialect::Backend;
use super::state::Table;
use super::waits::Waiter;
use super::{state, Shared};
use crate::locker::wait::PushEvent;
use crate::Error;

/// The background work of one locker, until it is dropped: every poll
/// interval, and at once when its doorbell is `rung` (MySQL), the lines of
/// the waiters (MySQL) and the leaders of the watched resources; every validity (at most a minute), a sweep of
/// expired rows that no call has deleted.
pub(super) async fn poll(shared: Weak<Shared>, rung: Arc<tokio::sync::Notify>) {
    let interval = match shared.upgrade() {
        Some(s) => s.config.poll_interval,
        None => return,
    };
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sweep = Instant::now();
    loop {
        // A ring of the doorbell (MySQL) reads at once; the ticks go on.
        tokio::select! {
            _ = ticks.tick() => {}
            _ = rung.notified() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let poll_waiters = shared.store.dialect.backend == Backend::MySql;
        let names = shared.waits.watched_names(poll_waiters);
        if !names.is_empty()
            && let Err(err) = look(&shared, &names, poll_waiters).await
        {
            tracing::debug!(locker = %shared.endpoint(), "poll failed: {err}");
        }
        let sweep_every = shared
            .config
            .validity
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        if last_sweep.elapsed() >= sweep_every {
            last_sweep = Instant::now();
            if let Err(err) = sweep(&shared).await {
                tracing::debug!(locker = %shared.endpoint(), "sweep failed: {err}");
            }
        }
    }
}

/// Reads the rows of `names` (no locks) and acts as the notices would: the
/// turns and wounds of this locker's waiters (when `waiters`), and the
/// leaders of its watches.
pub(super) async fn look(
    shared: &Arc<Shared>,
    names: &[String],
    waiters: bool,
) -> Result<(), Error> {
    let store = &shared.store;
    // Per waiter of this locker, the names where its turn has come: it is
    // granted all its names or none, so its turn is taken only once it
    // stands first on every one (a turn-taking call is a locking
    // transaction; taking it on one name of two each poll was one a poll).
    let mut turns: HashMap<String, usize> = HashMap::new();
    for batch in names.chunks(100) {
        let sql = store.dialect.load(batch.len());
        let rows = store
            .bounded(async {
                let mut q = sqlx::query(&sql);
                for name in batch {
                    q = q.bind(name.as_str());
                }
                store.fetch_all(q).await.map_err(|e| store.error(e))
            })
            .await?;
        let Some(first) = rows.first() else { continue };
        use sqlx::Row as _;
        let now_ms = first
            .try_get::<i64, _>("now_us")
            .map_err(|e| store.error(e))?
            .div_euclid(1000);
        let parsed: Vec<state::Row> = rows.iter().filter_map(|row| store.row(row).ok()).collect();
        let table = Table::load(batch, &parsed, now_ms);
        for r in &table.resources {
            shared.waits.leader_is(
                &r.name,
                &r.leader().map(|(uid, h)| (uid.to_owned(), h.stamp.clone())),
            );
            if !waiters {
                continue;
            }
            for (channel, uid) in r.turns() {
                if channel == shared.channel {
                    *turns.entry(uid).or_default() += 1;
                }
            }
            // Younger grants of this locker's waiters that an older place
            // waits behind: wounded once each.
            let wounded: Vec<String> = r
                .holders
                .iter()
                .filter(|(uid, h)| {
                    h.channel == shared.channel
                        && !h.ticket.is_empty()
                        && r.queued_before(uid, h.mode, Some(&h.ticket))
                })
                .map(|(uid, _)| uid.clone())
                .collect();
            for waiter in shared.waits.waiters_among(&wounded) {
                if shared.waits.first_wound(&waiter.args.uid) {
                    waiter.wake.notify(&waiter.args.uid, PushEvent::Wounded);
                }
            }
        }
    }
    let ready: Vec<String> = turns.keys().cloned().collect();
    for waiter in shared.waits.waiters_among(&ready) {
        let mut names: Vec<&String> = waiter.args.resources.iter().collect();
        names.sort();
        names.dedup();
        if turns.get(&*waiter.args.uid) == Some(&names.len()) {
            turn(shared, &waiter).await;
        }
    }
    Ok(())
}

/// Takes `waiter`'s turn, and pushes its grant when it was made.
pub(super) async fn turn(shared: &Arc<Shared>, waiter: &Waiter) {
    match shared.take_turn(waiter).await {
        Ok(true) => waiter.wake.notify(&waiter.args.uid, PushEvent::Granted),
        Ok(false) => {}
        Err(err) => {
            tracing::debug!(locker = %shared.endpoint(), uid = %waiter.args.uid, "turn not taken: {err}")
        }
    }
}

/// Deletes expired rows on resources no call touched since they expired,
/// through the same call every other uses (so their lines move on too):
/// up to ten batches of 100 names per sweep, going on past a name whose
/// call fails.
pub(super) async fn sweep(shared: &Arc<Shared>) -> Result<(), Error> {
    let store = &shared.store;
    for _ in 0..10 {
        let names = store
            .bounded(async {
                let rows = store
                    .fetch_all(sqlx::query(&store.dialect.expired_names()))
                    .await
                    .map_err(|e| store.error(e))?;
                rows.iter()
                    .map(|row| store.text(row, "name").map_err(|e| store.error(e)))
                    .collect::<Result<Vec<String>, Error>>()
            })
            .await?;
        let mut failed = 0;
        for name in &names {
            let swept = store
                .call(std::slice::from_ref(name), ("", ""), false, |t, _| {
                    t.finish();
                    Ok(())
                })
                .await;
            if let Err(err) = swept {
                failed += 1;
                tracing::debug!(locker = %shared.endpoint(), "sweep of one name failed: {err}");
            }
        }
        // A short batch was the last; a batch of failures would only come
        // back the same.
        if names.len() < 100 || failed == names.len() {
            break;
        }
    }
    Ok(())
}

/// Acts on a notice of this locker's channel: `T<uid>`, `W<uid>`, or
/// `H<uid>` (sent by this locker's own releases): a release handed the
/// waiter its turn and did not hear its commit. Any of them, sent by
/// someone else, costs a call and tells only what the rows say.
pub(super) async fn on_notice(shared: &Arc<Shared>, payload: &str) {
    let mut chars = payload.chars();
    let (Some(kind), uid) = (chars.next(), chars.as_str()) else {
        return;
    };
    let Some(waiter) = shared.waits.waiter(uid) else {
        return;
    };
    match kind {
        'W' => waiter.wake.notify(uid, PushEvent::Wounded),
        'T' => turn(shared, &waiter).await,
        'H' => match shared.confirm_handed(&waiter).await {
            Ok(true) => waiter.wake.notify(uid, PushEvent::Granted),
            Ok(false) => {}
            Err(err) => {
                tracing::debug!(locker = %shared.endpoint(), uid, "handed turn not confirmed: {err}")
            }
        },
        _ => {}
    }
}

#[cfg(feature = "postgres")]
pub(super) mod listener {
    //! The `LISTEN` connection of a PostgreSQL locker.
    use super::*;

    /// Listens on the locker's channel until it is dropped, reconnecting
    /// after a pause when the connection fails; notices sent while it is
    /// down are lost, and the waiters' re-checks stand in for them.
    pub(in crate::sql) async fn listen(shared: Weak<Shared>) {
        loop {
            let Some((url, channel)) = shared.upgrade().map(|s| (s.url.clone(), s.channel.clone()))
            else {
                return;
            };
            match sqlx::postgres::PgListener::connect(&url).await {
                Ok(mut listener) => {
                    if listener.listen(&channel).await.is_ok() {
                        if let Some(s) = shared.upgrade() {
                            s.listening.send_replace(Some(true));
                        }
                        while let Ok(Some(notice)) = listener.try_recv().await {
                            let Some(shared) = shared.upgrade() else {
                                return;
                            };
                            let payload = notice.payload().to_owned();
                            // A turn is a call of its own: run it apart,
                            // so that notices keep flowing.
                            tokio::spawn(async move { on_notice(&shared, &payload).await });
                        }
                    }
                }
                Err(err) => {
                    if let Some(s) = shared.upgrade() {
                        tracing::debug!(locker = %s.endpoint(), "LISTEN connection failed: {}", s.store.error(err));
                    }
                }
            }
            if let Some(s) = shared.upgrade() {
                s.listening.send_replace(Some(false));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
