//! Reproduces a past break: a client presenting the very token its server was configured with, when that token is longer than a handshake frame holds, was told the server rejected its token (`Error::Unauthorized`, "check the token").
//!
//! `RemoteLocker::connect`: "A server that rejects the token is an error:
//! [`Error::Unauthorized`]". `ServerConfig::new` takes any non-empty
//! token, and `LockServer::new` builds with one of 5000 bytes; the client
//! offers that same token, in a `Hello` larger than `MAX_HELLO_FRAME`,
//! which the server refuses as a malformed frame before it looks at the
//! token. The token is right: the error must not tell the operator to
//! check it, nor count the server as rejecting it. (Either side may
//! refuse such a token when it is configured; neither did.)
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
use quorum_lock::{Error, LocalLocker};

use crate::loopback;

#[tokio::test]
async fn a_long_token_the_server_was_given_is_not_said_rejected() {
    let token = "t".repeat(5000);
    let server = match LockServer::new(Arc::new(LocalLocker::new()), ServerConfig::new(&token)) {
        Ok(server) => server,
        // Refused when the server is built: the operator hears of it there.
        Err(_) => return,
    };
    let (bound, stop, serving) = loopback::serve_with_its_task(server).await;

    let mut config = RemoteConfig::new(token.clone());
    config.connect_timeout = Duration::from_secs(2);
    let made = tokio::time::timeout(
        Duration::from_secs(5),
        RemoteLocker::connect(bound.to_string(), config),
    )
    .await
    .expect("connect ended in time");
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;

    let err = match made {
        Ok(locker) if quorum_lock::NetLocker::is_online(&locker) => return,
        Ok(locker) => locker.connect_error().expect("offline, with a reason"),
        Err(err) => err,
    };
    assert!(
        !matches!(err, Error::Unauthorized { .. }),
        "the client presented the server's own token; the refusal is of the handshake \
         frame's size, not of the token, yet the client reports: {err}"
    );
}
