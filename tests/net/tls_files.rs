//! The fixed certificates of tests/data (tests/data/README.md) that the
//! TLS tests of tests/net serve and trust, included once here rather than
//! in each file.
#![cfg(feature = "tls")]

/// The test CA.
pub const CA: &[u8] = include_bytes!("../data/tls/ca.pem");
/// The CA's certificate for a lock server at `localhost` (and no other
/// name), and its key.
pub const NODE_CERT: &[u8] = include_bytes!("../data/tls/node-localhost.pem");
pub const NODE_KEY: &[u8] = include_bytes!("../data/tls/node-localhost-key.pem");
/// The CA's client certificate `test`, and its key.
pub const CLIENT_CERT: &[u8] = include_bytes!("../data/tls/client-test.pem");
pub const CLIENT_KEY: &[u8] = include_bytes!("../data/tls/client-test-key.pem");
/// A self-signed certificate for localhost and 127.0.0.1, from no CA, and
/// its key.
pub const SELF_SIGNED: &[u8] = include_bytes!("../data/test-cert.pem");
pub const SELF_SIGNED_KEY: &[u8] = include_bytes!("../data/test-key.pem");
