//! The wake-up of a MySQL or MariaDB locker's waiters by a call of another
//! process: a push where the server has no notifications.
//!
//! While a locker has waiters it keeps one connection of its own asleep in
//! `SELECT SLEEP(…)`, the statement's text naming the locker's channel. A
//! call (of any process) that passes a waiter's turn on, or wounds one,
//! calls the doorbell procedure (`routines.rs`), which finds that
//! statement in the server's process list by its text and interrupts it
//! with `KILL QUERY`; the sleeping locker then reads its waiters' lines at
//! once, as its poll would have `poll_interval` later.
//!
//! Invariants:
//! * A ring is only a hint to read sooner. Nothing is granted by it: the
//!   read and the turn it may lead to are the poll's own calls, under the
//!   resource's row lock. A ring lost (the bell between two sleeps, not
//!   yet connected, a user that may not see or end the sleeper's thread)
//!   costs the poll interval, never a lock.
//! * `KILL QUERY` only ever ends a doorbell's sleep: the thread is chosen
//!   by the exact text of a sleep naming the channel, on a connection that
//!   runs nothing else, in one procedure on one server (a look-up and a
//!   kill sent apart could reach two servers behind a proxy), and a
//!   server's thread ids are not reused while it runs.
//! * Ringing runs after the commit and apart from the call: it never
//!   delays or fails the call that passed the turn.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyPool, ConnectOptions as _, Connection as _};
use tokio::sync::Notify;

use super::routines::{answer_of, DOORBELL_SLEEP};
use super::store::warm::Warm;
use super::Shared;

/// How often a ring looks again for a sleeper it did not find (between two
/// sleeps of the bell, or while it connects), and how far apart.
const RING_TRIES: u32 = 5;
const RING_PAUSE: Duration = Duration::from_millis(2);

/// The text of the doorbell's sleep on `channel`, which rings look for.
/// `channel` is the table prefix (ASCII letters, digits, `_`) and hex.
fn sleep_text(channel: &str) -> String {
    // Ten seconds: the longest a server thread sleeps on after its locker
    // was dropped mid-sleep.
    format!("{DOORBELL_SLEEP}{channel} */")
}

/// Rings the doorbells of `channels`, once each, in the background, with
/// the doorbell procedure's `call` (none: the database has none this user
/// may run, and waiters wait for their poll): best effort, logged at debug
/// when it fails.
/// The task runs within the locker's `masking`, as its calls do: the
/// pool may open a connection for it, and the driver logs a refused
/// session statement with the server's words.
pub(super) fn ring(
    pool: &AnyPool,
    warm: &Arc<Warm>,
    endpoint: &str,
    masking: &super::server_notices::Masking,
    call: Option<Arc<str>>,
    channels: Vec<String>,
) {
    let Some(call) = call else { return };
    if channels.is_empty() {
        return;
    }
    let (pool, warm, endpoint) = (pool.clone(), warm.clone(), endpoint.to_owned());
    tokio::spawn(masking.scope(async move {
        for channel in channels {
            if let Err(err) = ring_one(&pool, &warm, &call, &channel).await {
                // The driver's text may quote the statement; its kind is
                // enough to say why a ring was lost.
                tracing::debug!(locker = %endpoint, "a doorbell ring failed ({})", kind(&err));
            }
        }
    }));
}

/// Rings one doorbell: the procedure looks the sleep up and ends it on the
/// server that runs the call. Not found (between two sleeps, or still
/// connecting), it is looked for again a few times.
async fn ring_one(
    pool: &AnyPool,
    warm: &Arc<Warm>,
    call: &str,
    channel: &str,
) -> Result<(), sqlx::Error> {
    let text = sleep_text(channel);
    for _ in 0..RING_TRIES {
        let mut conn = warm.take(pool).await?;
        let row = sqlx::query(call)
            .bind(text.as_str())
            .fetch_one(&mut *conn)
            .await;
        let row = match row {
            Ok(row) => {
                warm.keep(conn);
                row
            }
            // A connection kept from an earlier call that the server has
            // closed since (or the network lost): dropped, and the next
            // try takes another, opened anew if none is kept.
            Err(sqlx::Error::Io(_) | sqlx::Error::Protocol(_)) => {
                drop(conn);
                tokio::time::sleep(RING_PAUSE).await;
                continue;
            }
            Err(err) => return Err(err),
        };
        if answer_of(&row)? == 1 {
            return Ok(());
        }
        tokio::time::sleep(RING_PAUSE).await;
    }
    Ok(())
}

fn kind(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::Database(db) => format!("code {}", db.code().unwrap_or_default()),
        sqlx::Error::PoolTimedOut => "no connection of the pool was free".to_owned(),
        sqlx::Error::Io(_) => "the connection failed".to_owned(),
        _ => "the driver failed".to_owned(),
    }
}

/// Keeps the doorbell of the locker `shared` while it has waiters, and
/// wakes `rung` each time a sleep ends (rung, or run out); reconnects
/// after a pause when its connection fails. Ends with the locker.
pub(super) async fn answer(shared: Weak<Shared>, options: AnyConnectOptions, rung: Arc<Notify>) {
    loop {
        let (channel, endpoint, waiting) = match shared.upgrade() {
            Some(s) => (
                s.channel.clone(),
                s.endpoint().to_owned(),
                s.waits.waiting.clone(),
            ),
            None => return,
        };
        if !has_waiters(&shared) {
            // Asleep here, holding no connection, until a wait registers.
            let registered = waiting.notified();
            if !has_waiters(&shared) {
                registered.await;
            }
            continue;
        }
        let mut conn = match options.connect().await {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(locker = %endpoint, "the doorbell's connection failed ({})", kind(&err));
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let text = sleep_text(&channel);
        while has_waiters(&shared) {
            let slept = sleep(&mut conn, &text).await;
            rung.notify_one();
            match slept {
                Ok(_) => {}
                // MySQL reports a sleep ended by `KILL QUERY` as an error
                // of the statement; the connection stays usable.
                Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("70100") => {}
                Err(err) => {
                    tracing::debug!(locker = %endpoint, "the doorbell's sleep failed ({})", kind(&err));
                    break;
                }
            }
        }
        let _ = conn.close().await;
    }
}

/// One sleep of the doorbell. Boxed: the driver's future for a borrowed
/// connection is `Send` only for one lifetime, which `tokio::spawn` cannot
/// name.
fn sleep<'c>(
    conn: &'c mut sqlx::AnyConnection,
    text: &'c str,
) -> std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<sqlx::any::AnyQueryResult, sqlx::Error>>
            + Send
            + 'c,
    >,
> {
    // A `&str` without arguments goes by the text protocol, as the kill's
    // look-up expects the text to stand in the process list.
    Box::pin(sqlx::Executor::execute(conn, text))
}

fn has_waiters(shared: &Weak<Shared>) -> bool {
    shared.upgrade().is_some_and(|s| s.waits.has_waiters())
}
