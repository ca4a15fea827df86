//! The notices a PostgreSQL server sends, logged masked.
//!
//! The driver (sqlx 0.8) logs every `NoticeResponse` it reads through
//! `tracing`, target `sqlx::postgres::notice`, with the server's words as
//! they came, and has no setting or hook for them (its log settings cover
//! statements only; `client_min_messages` is a request a hostile server
//! ignores, and it sends notices before the login ends). A server quoting
//! the password it was sent would put it in the application's logs.
//!
//! So while the locker's own futures drive the driver, the thread's
//! dispatcher is a [`Notices`]: it hands every span and event, unchanged,
//! to the dispatcher that was the thread's default when the poll began
//! (the application's), except the driver's notices, which it holds; once
//! the poll returns, they are logged again at their level, escaped and
//! with every run of a secret this process holds masked
//! (`locker::secrets`), target `quorum_lock::sql::server_notices`. The
//! application's subscriber is never replaced or filtered: this one lives
//! only for the locker's polls.
//!
//! Any other event of the driver's (a database error it logs, such as a
//! failed session statement of a new connection, on MySQL as on
//! PostgreSQL) is passed on unchanged unless its words quote a secret,
//! hold a control character or run over 2 KiB: then it is held and logged
//! masked, escaped and cut as a notice is.
//!
//! Only when the application has set a tracing dispatcher: without one,
//! events go to the `log` crate's logger (tracing's `log` feature), which
//! tracing stops for the whole process once any dispatcher is set.
//!
//! Not covered: what the driver logs from a task of its own (the ping with
//! which it puts a connection back into its pool, a dropped listener's
//! `UNLISTEN`), and everything when no dispatcher was set.

use std::borrow::Cow;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

/// The driver's target for the notices it logs.
const DRIVER_TARGET: &str = "sqlx::postgres::notice";

/// The driver's target for the statements it logs (the locker's own SQL).
const STATEMENT_TARGET: &str = "sqlx::query";

/// Where every target of the driver begins.
const DRIVER_PREFIX: &str = "sqlx";

/// Notices held from one poll at most; the rest are counted.
const HELD: usize = 16;

/// The masking dispatcher of one locker, and the notices it holds.
#[derive(Clone)]
pub(super) struct Masking {
    dispatch: Dispatch,
    held: Arc<Held>,
}

thread_local! {
    /// The dispatcher that was the thread's default when the poll under
    /// way began: the one a [`Notices`] passes everything on to.
    static APP: RefCell<Option<Dispatch>> = const { RefCell::new(None) };
}

impl Masking {
    /// The masking dispatcher of the locker at `endpoint` (made once per
    /// locker: making a dispatcher makes tracing ask every log statement of
    /// the process again). Both drivers need it: sqlx logs a failed
    /// session statement of a new connection (`after_connect`) with the
    /// server's words, on MySQL as on PostgreSQL.
    pub(super) fn new(endpoint: &str) -> Self {
        let held = Arc::new(Held {
            endpoint: endpoint.to_owned(),
            notices: Mutex::default(),
        });
        let dispatch = Dispatch::new(Notices { held: held.clone() });
        Masking { dispatch, held }
    }

    /// `fut`, polled with this dispatcher as the thread's default.
    pub(super) fn scope<F: Future>(&self, fut: F) -> Masked<F> {
        Masked {
            fut: Box::pin(fut),
            masking: self.clone(),
        }
    }

    /// `f`, run with this dispatcher as the thread's default, as a poll of
    /// [`scope`](Self::scope) is: for what drives the driver without a
    /// future (its parse of the URL, which may read the password file and
    /// log a malformed line of it). What it held is logged, masked, once
    /// `f` returns.
    pub(super) fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let dispatch = &self.dispatch;
        // No tracing dispatcher was ever set: events go to the `log`
        // crate's logger, if any (tracing's `log` feature), and setting one
        // here, even for a poll, would end that for the whole process.
        if !tracing::dispatcher::has_been_set() {
            return f();
        }
        // The application's dispatcher now, whatever it was when the
        // locker was made. Within another locker's scope already (a call
        // made from a call), that one masks and holds.
        let app = tracing::dispatcher::get_default(Dispatch::clone);
        if app.is::<Notices>() {
            return f();
        }
        // Restored however `f` ends, as `with_default` restores the
        // thread's default: a driver's panic must not leave it set.
        struct Restore(Option<Option<Dispatch>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                if let Some(before) = self.0.take() {
                    // Dropped outside the borrow: a subscriber's drop may log.
                    let _app = APP.with(|cell| cell.replace(before));
                }
            }
        }
        let restore = Restore(Some(APP.with(|cell| cell.replace(Some(app)))));
        let result = tracing::dispatcher::with_default(dispatch, f);
        drop(restore);
        self.held.log();
        result
    }
}

/// A future whose polls see the masking dispatcher: see [`Masking::scope`].
pub(super) struct Masked<F> {
    fut: Pin<Box<F>>,
    masking: Masking,
}

impl<F: Future> Future for Masked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let fut = &mut this.fut;
        this.masking.run(|| fut.as_mut().poll(cx))
    }
}

/// One event held: its level, whether a notice (or another event of the
/// driver's), and its text as it came.
type HeldEvent = (Level, bool, String);

/// Notices held until the poll that read them returns.
struct Held {
    endpoint: String,
    /// What was held, and how many more came.
    notices: Mutex<(Vec<HeldEvent>, usize)>,
}

impl Held {
    fn hold(&self, level: Level, notice: bool, text: String) {
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        if notices.0.len() < HELD {
            notices.0.push((level, notice, text));
        } else {
            notices.1 += 1;
        }
    }

    /// Logs the notices held, masked and escaped, through the thread's
    /// default dispatcher (the application's, outside the poll).
    fn log(&self) {
        let (notices, more) = {
            let mut held = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
            if held.0.is_empty() {
                return;
            }
            (std::mem::take(&mut held.0), std::mem::take(&mut held.1))
        };
        let locker = &self.endpoint;
        for (level, is_notice, text) in notices {
            let notice = crate::locker::escape_peer_text(&text);
            macro_rules! notice {
                ($level:expr) => {
                    if is_notice {
                        tracing::event!(
                            target: "quorum_lock::sql::server_notices",
                            $level,
                            %locker,
                            %notice,
                            "the database sent a notice"
                        )
                    } else {
                        tracing::event!(
                            target: "quorum_lock::sql::server_notices",
                            $level,
                            %locker,
                            logged = %notice,
                            "the database driver logged a server's words (masked, escaped and cut)"
                        )
                    }
                };
            }
            match level {
                Level::ERROR => notice!(Level::ERROR),
                Level::WARN => notice!(Level::WARN),
                Level::INFO => notice!(Level::INFO),
                Level::DEBUG => notice!(Level::DEBUG),
                _ => notice!(Level::TRACE),
            }
        }
        if more > 0 {
            tracing::warn!(
                target: "quorum_lock::sql::server_notices",
                %locker,
                more,
                "the database sent more notices in one call than are logged"
            );
        }
    }
}

/// Whether a driver event's `text` may be logged as it came: short, on
/// one line, quoting no secret.
fn passes_unchanged(text: &str) -> bool {
    text.len() <= 2048
        && crate::locker::unshowable_character(text).is_none()
        && quotes_no_secret(text)
}

/// Whether a statement the driver logs may be logged as it came: short,
/// with no character a log must not show but line breaks and tabs,
/// quoting no secret.
fn statement_passes(text: &str) -> bool {
    text.len() <= 8 * 1024
        && text
            .split(['\n', '\r', '\t'])
            .all(|line| crate::locker::unshowable_character(line).is_none())
        && quotes_no_secret(text)
}

/// Whether `text` quotes no secret this process holds (searched whole
/// only up to a few KiB; a longer text is taken as quoting one).
fn quotes_no_secret(text: &str) -> bool {
    let (head, cut) = crate::locker::peer_text_head(text);
    !cut && matches!(crate::locker::secrets::mask(head), Cow::Borrowed(_))
}

/// The dispatcher: the application's, but for the driver's notices.
struct Notices {
    held: Arc<Held>,
}

impl Notices {
    /// `f` with the application's dispatcher: the one the poll under way
    /// began with, or outside a poll (tracing registering a log statement
    /// with every dispatcher) the thread's default.
    fn app<R>(&self, f: impl FnOnce(&Dispatch) -> R) -> R {
        APP.with(|cell| match &*cell.borrow() {
            Some(app) => f(app),
            None => f(&tracing::dispatcher::get_default(Dispatch::clone)),
        })
    }
}

/// The text of a notice event's fields, as the driver wrote them.
#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_str(&mut self, _field: &Field, value: &str) {
        self.push(value);
    }

    fn record_debug(&mut self, _field: &Field, value: &dyn std::fmt::Debug) {
        self.push(&format!("{value:?}"));
    }
}

impl Text {
    fn push(&mut self, value: &str) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        self.0.push_str(value);
    }
}

impl Subscriber for Notices {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.app(|app| app.register_callsite(metadata))
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.app(|app| app.enabled(metadata))
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.app(|app| app.new_span(span))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.app(|app| app.record(span, values))
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.app(|app| app.record_follows_from(span, follows))
    }

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let target = metadata.target();
        let notice = target == DRIVER_TARGET;
        if !notice && !target.starts_with(DRIVER_PREFIX) {
            return self.app(|app| app.event(event));
        }
        let mut text = Text::default();
        event.record(&mut text);
        // The driver's other events pass unchanged unless they quote a
        // secret (an error of the database's, say), or hold what a log line
        // must not show as it came: a control character, or more than the
        // 2 KiB of a peer's text an error quotes. Those are held, and
        // logged escaped and cut.
        // The statements the driver logs (target `sqlx::query`) are the
        // locker's own SQL, over several lines: line breaks and tabs pass
        // in them, nothing else a log must not show (a schema name the
        // database chose may be in one).
        let passes = if target == STATEMENT_TARGET {
            statement_passes(&text.0)
        } else {
            passes_unchanged(&text.0)
        };
        if !notice && passes {
            return self.app(|app| app.event(event));
        }
        self.held.hold(*metadata.level(), notice, text.0);
    }

    fn enter(&self, span: &Id) {
        self.app(|app| app.enter(span))
    }

    fn exit(&self, span: &Id) {
        self.app(|app| app.exit(span))
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.app(|app| app.clone_span(id))
    }

    fn try_close(&self, id: Id) -> bool {
        self.app(|app| app.try_close(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event as `target: fields`.
    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<String>>>);

    impl Subscriber for Collect {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut text = Text::default();
            event.record(&mut text);
            let line = format!("{}: {}", event.metadata().target(), text.0);
            self.0.lock().unwrap().push(line);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[tokio::test]
    async fn a_drivers_notice_is_logged_masked_and_the_rest_passes_unchanged() {
        const SECRET: &str = "Hq3vL8sR2tW6yP9k-notices";
        crate::locker::secrets::remember(SECRET.as_bytes());
        let app = Collect::default();
        let _default = tracing::subscriber::set_default(app.clone());
        tracing::callsite::rebuild_interest_cache();
        let masking = Masking::new("postgres://db.internal:5432/locks");
        let inner = masking.clone();
        masking
            .scope(async move {
                tracing::warn!(target: DRIVER_TARGET, message = format!("got {SECRET}\n").as_str());
                tracing::info!(target: "elsewhere", "plain words");
                // A call made from a call: masked once, no loop.
                inner
                    .scope(async {
                        tracing::warn!(target: DRIVER_TARGET, message = "nested");
                    })
                    .await;
            })
            .await;
        let lines = app.0.lock().unwrap().clone();
        assert!(
            lines.iter().all(|l| !l.starts_with(DRIVER_TARGET)),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&"elsewhere: plain words".to_owned()),
            "{lines:#?}"
        );
        let notices: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("quorum_lock::sql::server_notices"))
            .collect();
        assert_eq!(notices.len(), 2, "{lines:#?}");
        assert!(notices
            .iter()
            .any(|l| l.contains("got ***") && l.contains("\\n")));
        assert!(
            notices.iter().all(|l| !l.contains(&SECRET[..8])),
            "{notices:#?}"
        );
        assert!(notices.iter().any(|l| l.contains("nested")));
    }

    /// A driver's poll that panics under the masking dispatcher leaves the
    /// thread's record of the application's dispatcher as it found it, and
    /// so keeps that dispatcher alive no longer (found by a review: the
    /// record was put back only on a normal return).
    #[test]
    fn a_panicking_poll_leaves_no_application_dispatcher_on_the_thread() {
        struct Dropped(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        /// Collects as the tests' subscriber does; `_dropped` tells when
        /// the last clone of it is gone.
        #[derive(Clone)]
        struct App {
            collect: Collect,
            _dropped: Arc<Dropped>,
        }
        impl Subscriber for App {
            fn enabled(&self, m: &Metadata<'_>) -> bool {
                self.collect.enabled(m)
            }
            fn new_span(&self, a: &Attributes<'_>) -> Id {
                self.collect.new_span(a)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, e: &Event<'_>) {
                self.collect.event(e)
            }
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let masking = Masking::new("postgres://db.internal:5432/locks");
        {
            let app = App {
                collect: Collect::default(),
                _dropped: Arc::new(Dropped(dropped.clone())),
            };
            let _default = tracing::subscriber::set_default(app);
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                masking.run(|| panic!("the driver panics in a poll"))
            }));
            assert!(unwound.is_err());
        }
        let left = APP.with(|cell| cell.borrow().is_some());
        let alive = !dropped.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            !left && !alive,
            "APP left set: {left}; app dispatcher still alive: {alive}"
        );
    }

    #[test]
    fn a_driver_event_passes_unchanged_only_short_on_one_line_and_quoting_no_secret() {
        assert!(passes_unchanged(
            "error returned from database: 1045 (28000): denied"
        ));
        assert!(!passes_unchanged("denied\u{1b}]0;owned\u{7}\nforged row"));
        assert!(!passes_unchanged(&"x".repeat(2049)));
        assert!(statement_passes("SELECT 1\n  FROM t\tWHERE x = $1"));
        assert!(!statement_passes(
            "SET search_path = \"evil\u{1b}]0;owned\u{7}\""
        ));
    }
}
