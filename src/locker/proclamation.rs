//! What a locker keeps for leader election: the leader's proclamation (its
//! term and value) stored with its grant, and the watches that observers
//! register to be told when it changes.

use std::sync::Arc;
use std::time::Duration;

use crate::locker::wait::Wake;
use crate::Error;

/// Largest leader value, in bytes, that the library and the lock servers
/// accept. Values are kept in the lockers' memory with the leader's grant,
/// so they are meant for an address or a short description, not a payload.
pub const MAX_VALUE_LEN: usize = 4096;

/// What a leader announced: the term it leads in and its value, stored on a
/// locker with the leader's exclusive entry.
///
/// `term` is the leader's fencing token, so the terms of successive leaders
/// of one election only grow. `seq` numbers the proclamations of one term
/// (the first is 0); a locker keeps the one with the highest `seq` it was
/// sent for the entry, so a late retry of an old value never overwrites a
/// newer one.
///
/// ```
/// use quorum_lock::Proclamation;
///
/// let p = Proclamation::new(7, 0, b"10.0.0.5:8080".to_vec())?;
/// assert_eq!((p.term, p.seq, &p.value[..]), (7, 0, &b"10.0.0.5:8080"[..]));
/// assert!(Proclamation::new(7, 1, vec![0; 5000]).is_err());
/// # Ok::<(), quorum_lock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Proclamation {
    /// The leader's term: its fencing token in the election.
    pub term: u64,
    /// Which proclamation of this term it is; later ones are higher.
    pub seq: u64,
    /// The leader's value, at most [`MAX_VALUE_LEN`] bytes.
    pub value: Arc<[u8]>,
}

impl Proclamation {
    /// A proclamation, refused with [`Error::InvalidArgument`] when the
    /// value is longer than [`MAX_VALUE_LEN`].
    pub fn new(term: u64, seq: u64, value: impl Into<Arc<[u8]>>) -> Result<Self, Error> {
        let p = Proclamation {
            term,
            seq,
            value: value.into(),
        };
        p.validate()?;
        Ok(p)
    }

    /// Checks the value's length; lockers call this on input from the
    /// network.
    pub fn validate(&self) -> Result<(), Error> {
        if self.value.len() > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "a leader value of {} bytes; at most {MAX_VALUE_LEN} are allowed",
                self.value.len()
            )));
        }
        Ok(())
    }

    /// Whether this proclamation is newer than `other`: a higher term, or
    /// the same term and a higher `seq`.
    pub fn is_newer_than(&self, other: &Proclamation) -> bool {
        (self.term, self.seq) > (other.term, other.seq)
    }
}

/// A watch that an observer registers with
/// [`NetLocker::leader`](crate::NetLocker::leader).
///
/// The locker pushes [`PushEvent::Changed`](crate::PushEvent::Changed)
/// through `wake`, with the uid of the call, once after the leader of the
/// resource may have changed: its entry was released, expired or forced
/// open, or a new proclamation was stored. One push per registration; the
/// observer reads again, which registers again. A registration the observer
/// does not renew lapses after `ttl`.
#[derive(Debug, Clone)]
pub struct WatchArgs {
    /// How long the locker keeps the watch without hearing from the
    /// observer again.
    pub ttl: Duration,
    /// Where to push.
    pub wake: Wake,
}

/// The one resource an election call names, checked as every name is:
/// every locker's `proclaim` and `leader` refuse any other count.
pub(crate) fn election_resource(args: &crate::LockArgs) -> Result<&str, Error> {
    match &*args.resources {
        [one] => {
            crate::locker::args::validate_names(std::slice::from_ref(one))?;
            Ok(one)
        }
        list => Err(Error::invalid(format!(
            "an election call names exactly one resource, not {}",
            list.len()
        ))),
    }
}
