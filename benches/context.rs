//! Errors worded as the harness words them all, what failed and then why
//! ("cannot connect to etcd: connection refused"), with no allocation
//! unless there is an error: the lock loops use it on every call.

pub trait Context<T> {
    /// The error as `"{what}: {error}"`.
    fn context(self, what: &str) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}
