//! The kinds of refusal a lock server counts: the limit that refused a
//! connection, frame or request (`Limit`) and why a handshake failed
//! (`AuthRefusal`), each with the value of the metrics label that names
//! it. Dashboards and alerts match on these values: changing one breaks
//! them.

/// The limit that refused a connection, a frame or a request: the value of
/// the `limit` label, named after the setting or constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// `max_connections`: a new connection closed at once, a client
    /// rejected because all client connections are in use, or one still in
    /// its handshake closed to make room.
    MaxConnections,
    /// `MAX_HELLO_FRAME`: a handshake frame too large.
    HelloFrame,
    /// `MAX_FRAME`: a request frame too large; the connection is closed.
    Frame,
    /// `MAX_UID_LEN`, `MAX_OWNER_LEN`, `MAX_SOURCE_LEN` and the resource
    /// limits: a request with a field too long.
    FieldLength,
    /// `max_waiters_per_connection`: a wait refused.
    WaitersPerConnection,
    /// `max_entries_per_connection`: a lock refused.
    EntriesPerConnection,
    /// `max_connections_per_address`: a client connection rejected in its
    /// handshake.
    ConnectionsPerAddress,
    /// `max_bytes_per_connection`: a lock refused.
    BytesPerConnection,
    /// `max_lock_bytes`: a lock refused, the table is full.
    LockBytes,
}

impl Limit {
    #[cfg(feature = "metrics")]
    pub(super) const ALL: [Limit; 9] = [
        Limit::MaxConnections,
        Limit::HelloFrame,
        Limit::Frame,
        Limit::FieldLength,
        Limit::WaitersPerConnection,
        Limit::EntriesPerConnection,
        Limit::BytesPerConnection,
        Limit::LockBytes,
        Limit::ConnectionsPerAddress,
    ];

    #[cfg(feature = "metrics")]
    pub(super) fn label(self) -> &'static str {
        match self {
            Limit::MaxConnections => "max_connections",
            Limit::HelloFrame => "max_hello_frame",
            Limit::Frame => "max_frame",
            Limit::FieldLength => "field_length",
            Limit::WaitersPerConnection => "max_waiters_per_connection",
            Limit::EntriesPerConnection => "max_entries_per_connection",
            Limit::BytesPerConnection => "max_bytes_per_connection",
            Limit::LockBytes => "max_lock_bytes",
            Limit::ConnectionsPerAddress => "max_connections_per_address",
        }
    }
}

/// Why a handshake was refused: the value of the `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthRefusal {
    /// No valid token.
    Token,
    /// A protocol version the server does not speak.
    Version,
    /// The first frame was not a handshake, or too large.
    Malformed,
    /// No handshake within the handshake timeout.
    Timeout,
    /// The TLS handshake failed or took too long.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Tls,
}

impl AuthRefusal {
    #[cfg(feature = "metrics")]
    pub(super) const ALL: [AuthRefusal; 5] = [
        AuthRefusal::Token,
        AuthRefusal::Version,
        AuthRefusal::Malformed,
        AuthRefusal::Timeout,
        AuthRefusal::Tls,
    ];

    #[cfg(feature = "metrics")]
    pub(super) fn label(self) -> &'static str {
        match self {
            AuthRefusal::Token => "token",
            AuthRefusal::Version => "version",
            AuthRefusal::Malformed => "malformed",
            AuthRefusal::Timeout => "timeout",
            AuthRefusal::Tls => "tls",
        }
    }
}
