//! A runtime of the coordinator's own, for the background work of calls
//! made outside the runtime that acquired: an `unlock()` on a plain
//! thread, a guard or a lock future dropped there or on another runtime
//! (which may have no timers), a loss token taken there.
//!
//! Such work cannot go to the runtime that acquired the lock: it may be
//! idle (nothing drives its tasks) or gone (its tasks are dropped unrun).
//! One runtime per coordinator, started the first time it is needed, on a
//! thread of its own, serves all of it, so that however many calls are
//! made outside a runtime there is one thread and one drain task per
//! locker's retry queue (a failing locker still sees one probe per backoff
//! step). The thread ends when the coordinator is dropped: its tasks hold
//! the coordinator, so by then none is left.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The coordinator's own runtime, once started.
#[derive(Default)]
pub(crate) struct OwnRuntime {
    started: Mutex<Option<Started>>,
}

struct Started {
    handle: Handle,
    /// Dropped with the coordinator: the thread's runtime then returns.
    _stop: oneshot::Sender<()>,
}

impl OwnRuntime {
    /// The id of its runtime, if it was started.
    pub(crate) fn started_id(&self) -> Option<tokio::runtime::Id> {
        let started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        started.as_ref().map(|started| started.handle.id())
    }

    /// Its handle, starting it if it is not running yet; `None` when no
    /// runtime or thread can be made. Never blocks on the thread.
    pub(crate) fn handle(&self) -> Option<Handle> {
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(started) = &*started {
            return Some(started.handle.clone());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("quorum-lock-background".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .ok()?;
        *started = Some(Started {
            handle: handle.clone(),
            _stop: stop,
        });
        Some(handle)
    }
}

/// Where background work started here goes: the current runtime if it is
/// `home` (the one that acquired: it has timers, and is being driven
/// now); on another runtime or outside any, the coordinator's own (`own`),
/// since `home` may be gone or idle and the current one may lack timers;
/// if that cannot be started, `home`.
pub(crate) fn background(own: &OwnRuntime, home: &Handle) -> Handle {
    match Handle::try_current() {
        Ok(current) if current.id() == home.id() => current,
        _ => own.handle().unwrap_or_else(|| home.clone()),
    }
}

/// Spawns `work` on the coordinator's own runtime, giving it that
/// runtime's handle. Fails only when that runtime cannot be started; the
/// closure, and whatever it holds, is then dropped unrun.
pub(crate) fn on_own_runtime<F>(
    own: &OwnRuntime,
    work: impl FnOnce(Handle) -> F,
) -> Result<(), crate::Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    let handle = own.handle().ok_or(crate::Error::NoRuntime)?;
    handle.spawn(work(handle.clone()));
    Ok(())
}
