//! `Name`: a resource name as a shard's maps key it, a position in a
//! request's shared list of names, so that keying a name costs a reference
//! count instead of an allocation. It hashes and compares as the name
//! itself, so a map keyed by `Name` is looked up by `&str`.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A resource name as the shard maps key it: a position in a request's
/// shared list of names, so that keying a name costs a reference count
/// instead of an allocation. Hashes and compares as the name itself.
#[derive(Debug, Clone)]
pub(in crate::local) struct Name {
    list: Arc<[String]>,
    at: usize,
}

impl Name {
    /// The name at position `at` of `list`, which must be in bounds.
    pub(in crate::local) fn new(list: &Arc<[String]>, at: usize) -> Self {
        debug_assert!(at < list.len());
        Name {
            list: list.clone(),
            at,
        }
    }

    pub(in crate::local) fn as_str(&self) -> &str {
        &self.list[self.at]
    }

    /// This name as a map key, which may outlive the request it came from:
    /// a key from a list of several names would keep all of them alive for
    /// as long as anyone holds or waits on this one resource, far beyond
    /// what the server's memory accounting charged for it. Such a key gets
    /// a list of its own; a request for one name (the common case) keys it
    /// without allocating. Everything the table keeps past the request (the
    /// map and the expiry index) holds this key, never the request's list.
    pub(in crate::local) fn key(&self) -> Name {
        if self.list.len() == 1 {
            return self.clone();
        }
        Name {
            list: Arc::from([self.as_str().to_owned()]),
            at: 0,
        }
    }
}

impl std::ops::Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that maps keyed by `Name` can be searched by `&str`.
        self.as_str().hash(state);
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}
