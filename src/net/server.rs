//! `LockServer`: serves one `LocalLocker` to authenticated clients over
//! framed TCP, in the caller's runtime or in the `quorum-lock` binary.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::released::Released;
use super::session::accept;
use crate::{Error, LocalLocker};

/// What a connection may do, decided by the token it presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Lock, unlock, refresh and force-unlock by uid: a uid is a random
    /// capability, so a client can only touch locks it took.
    Client,
    /// Everything, including listing and forcing resources open.
    Admin,
}

/// Settings of a [`LockServer`].
///
/// ```
/// use quorum_lock::net::ServerConfig;
/// let config = ServerConfig::new("client-secret").admin_token("admin-secret");
/// assert_eq!(config.max_entries_per_connection, 100_000);
/// ```
#[derive(Clone)]
pub struct ServerConfig {
    client_token: String,
    admin_token: Option<String>,
    /// Most locks one connection may hold at once; beyond it, lock requests
    /// are refused with an error. Default 100,000.
    pub max_entries_per_connection: usize,
    /// How long a client has to authenticate after connecting. Default 5 s.
    pub handshake_timeout: Duration,
    /// How long a released uid is remembered, so that a lock or refresh
    /// arriving after its own release is refused. Default: the locker's
    /// validity.
    pub remember_released: Option<Duration>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<super::ServerTls>,
}

impl ServerConfig {
    /// Settings with the token every client must present.
    pub fn new(client_token: impl Into<String>) -> Self {
        ServerConfig {
            client_token: client_token.into(),
            admin_token: None,
            max_entries_per_connection: 100_000,
            handshake_timeout: Duration::from_secs(5),
            remember_released: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Serves TLS only, with these settings (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: super::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The token that also allows listing and forcing locks open. Without
    /// one, nobody can.
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// The role `token` grants, compared in constant time.
    pub(crate) fn role_of(&self, token: &str) -> Option<Role> {
        let matches = |expected: &str| bool::from(expected.as_bytes().ct_eq(token.as_bytes()));
        if self.admin_token.as_deref().is_some_and(matches) {
            Some(Role::Admin)
        } else if matches(&self.client_token) {
            Some(Role::Client)
        } else {
            None
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("client_token", &"<redacted>")
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "max_entries_per_connection",
                &self.max_entries_per_connection,
            )
            .field("handshake_timeout", &self.handshake_timeout)
            .finish()
    }
}

/// What every connection of one server shares.
pub(crate) struct ServerState {
    pub(crate) locker: Arc<LocalLocker>,
    pub(crate) config: ServerConfig,
    pub(crate) released: Released,
    pub(crate) shutdown: CancellationToken,
}

/// Serves a [`LocalLocker`] over the network.
///
/// Each connection is served by one task that handles its requests in
/// order, inline, and writes all the replies to one read batch at once.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::LocalLocker;
/// use quorum_lock::net::{LockServer, ServerConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new("secret"))?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(server.serve(listener, async { let _ = stopped.await; }));
/// // ... serve clients ...
/// let _ = stop.send(());
/// running.await?;
/// # Ok(())
/// # }
/// ```
pub struct LockServer {
    state: Arc<ServerState>,
}

impl LockServer {
    /// A server for `locker`. Fails with [`Error::InvalidArgument`] when the
    /// client token is empty or the admin token equals it.
    pub fn new(locker: Arc<LocalLocker>, config: ServerConfig) -> Result<Self, Error> {
        if config.client_token.is_empty() {
            return Err(Error::InvalidArgument(
                "the client token must not be empty".into(),
            ));
        }
        if config
            .admin_token
            .as_deref()
            .is_some_and(|a| a.is_empty() || a == config.client_token)
        {
            return Err(Error::InvalidArgument(
                "the admin token must be non-empty and differ from the client token".into(),
            ));
        }
        let remember = config.remember_released.unwrap_or(locker.config().validity);
        Ok(LockServer {
            state: Arc::new(ServerState {
                locker,
                released: Released::new(remember),
                config,
                shutdown: CancellationToken::new(),
            }),
        })
    }

    /// Accepts connections on `listener` until `shutdown` resolves, then
    /// stops accepting, lets each connection finish the batch it is
    /// handling, and returns.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future stops accepting, but the connections already
    /// accepted keep being served until their clients disconnect; resolve
    /// `shutdown` instead for a clean stop.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(listen = %local, "lock server accepting connections");
        let mut sessions = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        sessions.spawn(accept(stream, peer, self.state.clone()));
                    }
                    Err(err) => {
                        // Out of file descriptors and the like: back off briefly.
                        tracing::warn!(%err, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            }
        }
        tracing::info!(listen = %local, "lock server shutting down");
        self.state.shutdown.cancel();
        let grace = tokio::time::sleep(Duration::from_secs(5));
        tokio::pin!(grace);
        while !sessions.is_empty() {
            tokio::select! {
                _ = sessions.join_next() => {}
                () = &mut grace => { sessions.abort_all(); break; }
            }
        }
    }

    /// Binds `addr` and serves until `shutdown` resolves. Returns the bound
    /// address once listening, and a future that runs the server.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it before it resolves closes the listener.
    /// The returned server future behaves as [`serve`](Self::serve).
    pub async fn bind(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<(SocketAddr, impl Future<Output = ()> + Send)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        Ok((local, self.serve(listener, shutdown)))
    }
}
