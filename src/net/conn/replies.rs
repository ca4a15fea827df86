//! The calls of one connection waiting for their replies, by request id:
//! a slot per call instead of a channel per call.
//!
//! Invariants:
//! * A slot is made by its call before the request is sent, and removed
//!   only by that call (taking its reply, or giving up: [`Waiting`]'s
//!   drop) or, while it still waits, by the connection going down
//!   ([`Replies::fail_waiting`]). So a reply reaches the call that sent its
//!   id, and a reply read before the connection went down stays for it.
//! * Request ids are distinct (one counter per locker): one slot per call.
//! * Wakers are woken after the table's lock is released.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasherDefault;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use crate::net::wire::Reply;

/// A call's place: its reply once read, and the task to wake then (or
/// when the connection goes down).
#[derive(Default)]
struct Slot {
    reply: Option<Reply>,
    waker: Option<Waker>,
}

/// The slots of a connection's calls still waiting, or answered and not
/// yet taken.
#[derive(Default)]
pub(super) struct Replies {
    slots: Mutex<HashMap<u64, Slot, BuildHasherDefault<IdHasher>>>,
}

impl Replies {
    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Slot, BuildHasherDefault<IdHasher>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the slot of request `id`, removed when the returned guard is
    /// dropped.
    pub(super) fn wait_for(&self, id: u64) -> Waiting<'_> {
        self.slots().insert(id, Slot::default());
        Waiting { replies: self, id }
    }

    /// Puts `reply` in the slot of request `id`, if a call still waits for
    /// it, and wakes that call. Whether it did; a second reply to one id,
    /// or one to a call that gave up, is dropped.
    pub(super) fn deliver(&self, id: u64, reply: Reply) -> bool {
        let waker = {
            let mut slots = self.slots();
            match slots.get_mut(&id) {
                Some(slot) if slot.reply.is_none() => {
                    slot.reply = Some(reply);
                    Some(slot.waker.take())
                }
                _ => None,
            }
        };
        let delivered = waker.is_some();
        if let Some(Some(waker)) = waker {
            waker.wake();
        }
        delivered
    }

    /// Removes the slots of every call still waiting and returns their
    /// wakers (to wake once the connection is marked down: they fail as
    /// closed) and how many there were. Replies already read stay for
    /// their calls.
    pub(super) fn fail_waiting(&self) -> (Vec<Waker>, usize) {
        let mut wakers = Vec::new();
        let mut slots = self.slots();
        let before = slots.len();
        slots.retain(|_, slot| {
            if slot.reply.is_some() {
                return true;
            }
            wakers.extend(slot.waker.take());
            false
        });
        let failed = before - slots.len();
        (wakers, failed)
    }

    /// How many slots there are (tests: none may be left behind).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots().len()
    }
}

/// A call's slot, removed when the call stops waiting.
pub(super) struct Waiting<'a> {
    replies: &'a Replies,
    id: u64,
}

impl Waiting<'_> {
    /// The reply once the reader put it in the slot; `None` once the slot
    /// is gone (the connection went down).
    pub(super) fn reply(&self) -> impl Future<Output = Option<Reply>> + Unpin + '_ {
        std::future::poll_fn(move |cx| {
            let mut slots = self.replies.slots();
            let Entry::Occupied(mut slot) = slots.entry(self.id) else {
                return Poll::Ready(None);
            };
            if let Some(reply) = slot.get_mut().reply.take() {
                slot.remove();
                return Poll::Ready(Some(reply));
            }
            let waker = &mut slot.get_mut().waker;
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.replies.slots().remove(&self.id);
    }
}

/// Hashes request ids, which are distinct counters: a multiplication
/// spreads them over the table, and nobody but this client picks them.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
