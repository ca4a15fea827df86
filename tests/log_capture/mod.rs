//! What the library logs, kept as text for a test to read: install a
//! [`Capture`] as the thread's default subscriber, and every event logged
//! on that thread (a current-thread runtime's tasks included) becomes one
//! line, `LEVEL message name=value ...`, with each value as `Debug` shows
//! it: the text a formatter would write, escapes and all.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<(Level, String)>>>);

impl Capture {
    /// A capture, the thread's default subscriber until the guard drops.
    ///
    /// tracing caches, for the whole process, whether a log statement is
    /// wanted at all, asking the default subscriber of the first thread
    /// that runs it; a test thread without one would answer "never" and
    /// silence it for every capture after. So a subscriber that wants
    /// everything and keeps nothing is every thread's default first.
    pub fn install() -> (Capture, DefaultGuard) {
        static DISCARD: std::sync::Once = std::sync::Once::new();
        DISCARD.call_once(|| {
            // Another global default (one a test set) answers for itself.
            let _ = tracing::subscriber::set_global_default(Discard);
        });
        let capture = Capture::default();
        let guard = tracing::subscriber::set_default(capture.clone());
        tracing::callsite::rebuild_interest_cache();
        (capture, guard)
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.entries().into_iter().map(|(_, line)| line).collect()
    }

    /// The lines so far that contain `text`.
    pub fn containing(&self, text: &str) -> Vec<String> {
        let mut lines = self.lines();
        lines.retain(|line| line.contains(text));
        lines
    }

    /// The lines so far at `level` or more severe (`Level::WARN`: warnings
    /// and errors).
    pub fn at_least(&self, level: Level) -> Vec<String> {
        let mut entries = self.entries();
        entries.retain(|(at, _)| *at <= level);
        entries.into_iter().map(|(_, line)| line).collect()
    }

    fn entries(&self) -> Vec<(Level, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The number after ` name=` in `line`.
pub fn count(line: &str, name: &str) -> u64 {
    let (_, rest) = line
        .split_once(&format!(" {name}="))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let level = *event.metadata().level();
        let mut line = Line(format!("{level} "));
        event.record(&mut line);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((level, line.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Wants every event and span, and keeps none of them.
struct Discard;

impl Subscriber for Discard {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
