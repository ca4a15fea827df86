//! A certificate of the test CA (tests/data/tls/ca.pem) for a DNS name
//! no test reaches a server by, one carrying terminal escape sequences
//! ("evil", ESC "]0;pwned" BEL, ESC "[2J", "x.example"), as a hostile
//! server might present. Shared by the test that checks such a name is
//! shown escaped and the one whose minority server is refused for it.
#![cfg(feature = "tls")]

/// The certificate (PEM).
pub const CERT: &[u8] = b"-----BEGIN CERTIFICATE-----
MIIBzTCCAXSgAwIBAgIUC9uvSVyuW3ofW/tZ7N5oIkk8DnUwCgYIKoZIzj0EAwIw
IjEgMB4GA1UEAwwXcXVvcnVtLWxvY2sgQ0EgMjg0NDRiY2UwIBcNMjYxMTMwMTQw
NzMzWhgPMjEyNjExMDYxNDA3MzNaMA8xDTALBgNVBAMMBGV2aWwwWTATBgcqhkjO
PQIBBggqhkjOPQMBBwNCAARcfmmmVHeR1xFsnqtUnJEp/PF8bhD4DTxL1DiluEfW
OdHaLCPjTXCPultXtbBAL3/tvzeFAGMOjeklkpGmA5+Fo4GYMIGVMCYGA1UdEQQf
MB2CG2V2aWwbXTA7cHduZWQHG1sySnguZXhhbXBsZTAJBgNVHRMEAjAAMBMGA1Ud
JQQMMAoGCCsGAQUFBwMBMAsGA1UdDwQEAwIHgDAdBgNVHQ4EFgQU5ct7HiBCjo3q
RxtgETPx9ucr7m4wHwYDVR0jBBgwFoAUIycOs1i12SxTo8me+CKyOXkjuJgwCgYI
KoZIzj0EAwIDRwAwRAIgQGkl0rIjehIElaOYa0buJlfFxmlLDLpysteIIyiIvjoC
IGODfc+AbRmvs7f3DjdMdoLBbETwy5btWWHysuZRMzOM
-----END CERTIFICATE-----";

/// Its private key (PEM).
pub const KEY: &[u8] = b"-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZwbBtvqwYOBs8cto
L9f6rHSezz9ZeYxAtwANAk8oO72hRANCAARcfmmmVHeR1xFsnqtUnJEp/PF8bhD4
DTxL1DiluEfWOdHaLCPjTXCPultXtbBAL3/tvzeFAGMOjeklkpGmA5+F
-----END PRIVATE KEY-----";
