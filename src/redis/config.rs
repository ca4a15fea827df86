//! `RedisConfig`: how a `RedisLocker` reaches its Redis server, names its
//! keys and keeps entries. A `Debug` of it never shows the password.

use std::time::Duration;

/// How a [`RedisLocker`](super::RedisLocker) connects and keeps entries.
///
/// ```
/// use std::time::Duration;
/// use quorum_lock::redis::RedisConfig;
///
/// let config = RedisConfig {
///     prefix: "billing-locks:".into(),
///     ..RedisConfig::default()
/// };
/// assert_eq!(config.quarantine, config.validity);
/// assert_eq!(config.validity, Duration::from_secs(60));
/// ```
#[derive(Clone)]
pub struct RedisConfig {
    /// Prepended to every resource name to form its key, and to the name
    /// of the locker's pub/sub channel.
    pub prefix: String,
    /// How long an entry that is not refreshed is kept. Values beyond ten
    /// years (`Duration::MAX` included) are taken as ten years.
    pub validity: Duration,
    /// How long after the Redis server started it refuses new grants, and
    /// every other answer that would count (see the module docs). Shorter
    /// than this client's validity, it is taken as that validity; keep it
    /// at least the validity of every client (the default equals the
    /// default validity): a server that restarted may have lost locks that
    /// are still held, and they have all been refreshed back or expired
    /// once a validity has passed. Fencing tokens are refused for at least
    /// [`FENCE_QUARANTINE`](crate::FENCE_QUARANTINE) whatever this is, unless it is zero. Zero is
    /// only safe for a server that never granted a lock nor drew a token
    /// before it started, such as in tests. Values beyond ten years are
    /// taken as ten years.
    pub quarantine: Duration,
    /// How long connecting, and then each call, may take before it counts
    /// as failed.
    pub call_timeout: Duration,
    /// The certificate authority, in PEM, that a `rediss://` server's
    /// certificate must chain to; `None` uses the system's trust store.
    pub tls_root_cert: Option<Vec<u8>>,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            prefix: "quorum-lock:".into(),
            validity: Duration::from_secs(60),
            quarantine: Duration::from_secs(60),
            call_timeout: Duration::from_secs(5),
            tls_root_cert: None,
        }
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("prefix", &self.prefix)
            .field("validity", &self.validity)
            .field("quarantine", &self.quarantine)
            .field("call_timeout", &self.call_timeout)
            .field("tls_root_cert", &self.tls_root_cert.as_ref().map(|_| "…"))
            .finish()
    }
}
