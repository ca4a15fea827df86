//! Tokens compared as fixed-length keyed digests, so that how long a
//! handshake takes says nothing about the configured tokens.
//!
//! Comparing the bytes themselves in constant time still leaks the
//! configured token's length: `ct_eq` of slices of different lengths
//! answers at once, and the time to compare grows with the length. Here
//! each configured token is hashed once, when the server is built, and a
//! presented token is hashed on its own: the work per handshake depends
//! only on what the peer sent (whose length it knows), and the comparison
//! is of two 16-byte digests in constant time, whatever the lengths.

use std::hash::{BuildHasher, Hasher};

use std::collections::hash_map::RandomState;
use subtle::ConstantTimeEq;

/// A 128-bit digest of a token under keys drawn for this process.
#[derive(Clone, Copy)]
pub(crate) struct Digest([u8; 16]);

impl Digest {
    /// Whether two digests are equal, in time independent of their bytes.
    pub(crate) fn matches(&self, other: &Digest) -> bool {
        bool::from(self.0.ct_eq(&other.0))
    }
}

/// Hashes tokens with two keyed SipHash functions, one per half of the
/// digest.
///
/// The keys are secret and random per process: std's `RandomState` keys
/// SipHash with 128 random bits per thread (two instances made in a row
/// differ in one key word by one), and each half also hashes 128 bits of
/// its own from `rand` before the token, so the halves are independent
/// functions. A peer that knows neither can neither predict a digest nor
/// search for another token with the same one faster than by guessing
/// online, one handshake per guess, against 128 bits.
#[derive(Clone)]
pub(crate) struct TokenHasher {
    keys: [RandomState; 2],
    salts: [[u64; 2]; 2],
}

impl TokenHasher {
    pub(crate) fn new() -> Self {
        TokenHasher {
            keys: [RandomState::new(), RandomState::new()],
            salts: [
                [rand::random(), rand::random()],
                [rand::random(), rand::random()],
            ],
        }
    }

    pub(crate) fn digest(&self, token: &str) -> Digest {
        let mut out = [0u8; 16];
        for ((key, salt), half) in self
            .keys
            .iter()
            .zip(&self.salts)
            .zip(out.chunks_exact_mut(8))
        {
            let mut hasher = key.build_hasher();
            hasher.write_u64(salt[0]);
            hasher.write_u64(salt[1]);
            // The length first, so that no token is a prefix of another's
            // input.
            hasher.write_usize(token.len());
            hasher.write(token.as_bytes());
            half.copy_from_slice(&hasher.finish().to_le_bytes());
        }
        Digest(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_tokens_match_and_others_do_not() {
        let hasher = TokenHasher::new();
        let configured = hasher.digest("client-secret");
        assert!(configured.matches(&hasher.digest("client-secret")));
        for other in [
            "client-secre",
            "client-secret-",
            "client-secreT",
            "dlient-secret",
            "",
            "client-secret\0",
        ] {
            assert!(
                !configured.matches(&hasher.digest(other)),
                "{other:?} matched"
            );
        }
    }

    #[test]
    fn digests_are_keyed_per_hasher() {
        let (one, two) = (TokenHasher::new(), TokenHasher::new());
        assert!(!one.digest("token").matches(&two.digest("token")));
    }
}
