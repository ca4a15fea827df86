//! Where a closed connection's places in line are ended: a thread of the
//! server's own, started at the first such close.
//!
//! Invariants: every clean-up handed over runs, in the order handed over,
//! whatever becomes of the runtime the connection was served on (tokio's
//! blocking pool drops what it has not started once its runtime shuts
//! down, and a place left standing would block others until it expires);
//! and none runs on a thread that serves requests. Without the thread (it
//! could not be started) a clean-up runs where it is handed over.

use std::sync::mpsc::Sender;
use std::sync::OnceLock;

/// One clean-up.
type Job = Box<dyn FnOnce() + Send>;

/// The server's clean-up thread, started by its first job. It ends once
/// this is dropped (with the server's state) and its jobs are done.
#[derive(Default)]
pub(super) struct Closings {
    jobs: OnceLock<Option<Sender<Job>>>,
}

impl Closings {
    /// Runs `job` on the clean-up thread.
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) {
        let jobs = self.jobs.get_or_init(|| {
            let (jobs, todo) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("quorum-lock-closings".into())
                .spawn(move || {
                    for job in todo {
                        job();
                    }
                });
            match started {
                Ok(_) => Some(jobs),
                Err(err) => {
                    tracing::warn!(%err, "cannot start the thread that ends closed connections' places; ending them where they close");
                    None
                }
            }
        });
        let job: Job = Box::new(job);
        let refused = match jobs {
            Some(jobs) => jobs.send(job).err().map(|refused| refused.0),
            None => Some(job),
        };
        // The thread is gone (it panicked): here, then.
        if let Some(job) = refused {
            job();
        }
    }
}
