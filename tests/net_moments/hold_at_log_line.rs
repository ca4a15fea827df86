//! A tracing subscriber that holds, once, the thread that logs a given
//! line, until the test lets it go (or 5 s pass): to pin a moment inside
//! the library (between a reopen's handshake and its install, say) that
//! no other hook reaches.

use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The subscriber, and the two ends a test uses: `reached` fires when a
/// thread logs the line (and waits), `release` lets it go.
pub struct HoldAtLogLine {
    pub dispatch: tracing::Dispatch,
    pub reached: mpsc::Receiver<()>,
    pub release: mpsc::Sender<()>,
}

impl HoldAtLogLine {
    /// Holds the first thread that logs a message containing `line`.
    pub fn new(line: &'static str) -> HoldAtLogLine {
        let (reached_tx, reached) = mpsc::channel::<()>();
        let (release, release_rx) = mpsc::channel::<()>();
        let dispatch = tracing::Dispatch::new(Hold {
            line,
            reached: Mutex::new(Some(reached_tx)),
            release: Mutex::new(Some(release_rx)),
        });
        HoldAtLogLine {
            dispatch,
            reached,
            release,
        }
    }
}

struct Hold {
    line: &'static str,
    reached: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<Option<mpsc::Receiver<()>>>,
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Hold {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        if !message.0.contains(self.line) {
            return;
        }
        let reached = self
            .reached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let release = self
            .release
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (Some(reached), Some(release)) = (reached, release) {
            let _ = reached.send(());
            let _ = release.recv_timeout(Duration::from_secs(5));
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
