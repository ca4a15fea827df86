//! Runtimes for the tests whose subject is the runtime itself: a
//! current-thread one (driven only inside `block_on`) and a multi-thread
//! one with a single worker (driven all the time).

use tokio::runtime::{Builder, Runtime};

pub fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

pub fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}
