//! The byte stream under a connection: plain TCP, or TLS over TCP with the
//! `tls` feature. Both sides work on a boxed stream so the protocol code is
//! written once.

use tokio::io::{AsyncRead, AsyncWrite};

/// A bidirectional byte stream a connection can run over.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

pub(crate) type BoxIo = Box<dyn Io>;
