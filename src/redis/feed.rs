//! The pub/sub subscriptions of a `RedisLocker`: one for its waiters'
//! pushes (`waits.rs`), one for its observers' change notices
//! (`watches.rs`), each on a connection of its own, started by the first
//! call that wants it and kept up until the locker is dropped.
//!
//! Pub/sub delivers at most once: what is published while a subscription
//! reconnects is lost, and the callers' re-checks stand in for it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use super::Shared;

/// One channel and whether the locker is subscribed to it now.
pub(super) struct Feed {
    pub channel: String,
    subscribed: watch::Sender<bool>,
}

impl Feed {
    pub(super) fn new(channel: String) -> Feed {
        Feed {
            channel,
            subscribed: watch::Sender::new(false),
        }
    }

    /// Whether messages on the channel reach this locker now.
    pub(super) fn subscribed(&self) -> bool {
        *self.subscribed.borrow()
    }

    pub(super) fn set_subscribed(&self, up: bool) {
        self.subscribed.send_replace(up);
    }

    /// Waits up to `within` for the subscription; whether it is up.
    pub(super) async fn wait_subscribed(&self, within: Duration) -> bool {
        let mut rx = self.subscribed.subscribe();
        let up = tokio::time::timeout(within, rx.wait_for(|up| *up)).await;
        matches!(up, Ok(Ok(_)))
    }
}

/// Which subscription of a locker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    /// The waiters' turns and wounds.
    Waits,
    /// The observers' change notices.
    Watches,
}

impl Which {
    pub(super) fn feed(self, shared: &Shared) -> &Feed {
        match self {
            Which::Waits => &shared.waits.feed,
            Which::Watches => &shared.watches.feed,
        }
    }

    fn index(self) -> usize {
        match self {
            Which::Waits => 0,
            Which::Watches => 1,
        }
    }
}

/// One listener task per subscription.
pub(super) type Listeners = [Option<tokio::task::JoinHandle<()>>; 2];

/// Starts the listener of `which` if it is not running; whether messages
/// reach the locker.
pub(super) async fn listening(
    listeners: &std::sync::Mutex<Listeners>,
    shared: &Arc<Shared>,
    which: Which,
) -> bool {
    let feed = which.feed(shared);
    let started = {
        let mut listeners = listeners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut listeners[which.index()];
        // A listener runs on the runtime of the call that started it, and
        // ends with that runtime: start it again on this one.
        if slot.as_ref().is_some_and(|task| !task.is_finished()) {
            false
        } else {
            feed.set_subscribed(false);
            *slot = Some(tokio::spawn(listen(Arc::downgrade(shared), which)));
            true
        }
    };
    if !started {
        return feed.subscribed();
    }
    // The call that starts the listener waits for the subscription, so
    // what is published right after it is not lost; later calls go on
    // while it is down, and their re-checks stand in for it.
    feed.wait_subscribed(shared.config.call_timeout).await
}

/// Keeps the subscription of `which` up and acts on what it hears, until
/// the locker is dropped.
async fn listen(shared: Weak<Shared>, which: Which) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some((client, channel, endpoint)) = shared.upgrade().map(|s| {
            (
                s.link.client().clone(),
                which.feed(&s).channel.clone(),
                s.endpoint.clone(),
            )
        }) else {
            return;
        };
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                Ok(()) => {
                    backoff = Duration::from_millis(50);
                    if let Some(s) = shared.upgrade() {
                        which.feed(&s).set_subscribed(true);
                        if which == Which::Watches {
                            // Notices published while the subscription was
                            // down are lost: every watch reads again now
                            // instead of at its re-check.
                            s.watches.fire_all();
                        }
                    }
                    let mut messages = pubsub.into_on_message();
                    while let Some(message) = messages.next().await {
                        let Some(s) = shared.upgrade() else {
                            return;
                        };
                        let payload = message.get_payload_bytes();
                        match which {
                            Which::Waits => s.waits.on_message(&s, payload).await,
                            Which::Watches => s.watches.on_message(payload),
                        }
                    }
                    if let Some(s) = shared.upgrade() {
                        which.feed(&s).set_subscribed(false);
                    }
                    tracing::debug!(locker = %endpoint, ?which, "Redis push subscription ended; reconnecting");
                }
                Err(err) => {
                    tracing::debug!(locker = %endpoint, ?which, kind = ?err.kind(), "cannot subscribe for pushes")
                }
            },
            Err(err) => {
                tracing::debug!(locker = %endpoint, ?which, kind = ?err.kind(), "cannot open a push connection")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}
