//! `ByRefresh`: a shard's entries in order of last refresh, oldest first,
//! as a doubly linked list threaded through a slab. Adding, refreshing
//! (moving to the back) and removing are O(1), so expiry costs O(expired);
//! the slab allocates only when it outgrows its peak.

use std::sync::Arc;

use tokio::time::Instant;

use super::memory::{room, SLAB_KEPT};
use super::name::Name;

/// Entries in order of last refresh, oldest first: a doubly linked list
/// threaded through a slab, so that adding an entry, moving it to the back
/// on refresh and removing it are O(1), and allocate only when the slab
/// outgrows its peak.
pub(super) struct ByRefresh {
    pub(super) nodes: Vec<Node>,
    /// The oldest and newest linked node; `NIL` when none.
    pub(super) head: usize,
    pub(super) tail: usize,
    /// Unlinked nodes, chained through `next`; `NIL` when none.
    pub(super) free: usize,
    /// Linked nodes: the entries of the shard.
    pub(super) len: usize,
}

pub(super) struct Node {
    /// `None` while the node is free.
    pub(super) name: Option<Name>,
    /// The holder's uid, so that expiry finds the entry with one lookup in
    /// the name's readers; `None` while the node is free.
    pub(super) uid: Option<Arc<str>>,
    pub(super) refreshed: Instant,
    pub(super) prev: usize,
    pub(super) next: usize,
}

pub(super) const NIL: usize = usize::MAX;

impl Default for ByRefresh {
    fn default() -> Self {
        ByRefresh {
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
        }
    }
}

impl ByRefresh {
    /// Adds the entry of `uid` on `name` refreshed `at`; returns its slot.
    pub(super) fn push(&mut self, name: Name, uid: Arc<str>, at: Instant) -> usize {
        let node = Node {
            name: Some(name),
            uid: Some(uid),
            refreshed: at,
            prev: NIL,
            next: NIL,
        };
        let slot = match self.nodes.get_mut(self.free) {
            Some(free) => {
                let slot = self.free;
                self.free = free.next;
                *free = node;
                slot
            }
            None => {
                room(&mut self.nodes);
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.link(slot);
        self.len += 1;
        slot
    }

    /// The slot and refresh time of the oldest entry.
    pub(super) fn oldest(&self) -> Option<(usize, Instant)> {
        self.nodes.get(self.head).map(|n| (self.head, n.refreshed))
    }

    /// Moves the entry in `slot` to its place as refreshed `at`.
    pub(super) fn touch(&mut self, slot: usize, at: Instant) {
        if self.nodes.get(slot).is_some_and(|n| n.name.is_some()) {
            self.unlink(slot);
            self.nodes[slot].refreshed = at;
            self.link(slot);
        }
    }

    /// Removes the entry in `slot`; returns its name and uid.
    pub(super) fn remove(&mut self, slot: usize) -> Option<(Name, Arc<str>)> {
        let node = self.nodes.get_mut(slot)?;
        let name = node.name.take()?;
        let uid = node.uid.take()?;
        self.unlink(slot);
        self.len -= 1;
        if self.head == NIL {
            // Empty: start the slab over rather than keep a free chain (its
            // room goes back in `compact_if_sparse`).
            self.nodes.clear();
            self.free = NIL;
        } else {
            self.nodes[slot].next = self.free;
            self.free = slot;
        }
        Some((name, uid))
    }

    /// Links the unlinked node `slot` in refresh order. Callers read the
    /// clock before they lock the shard, so a node may be a little older
    /// than the newest; the walk back from the tail is short.
    pub(super) fn link(&mut self, slot: usize) {
        let at = self.nodes[slot].refreshed;
        let mut prev = self.tail;
        while prev != NIL && self.nodes[prev].refreshed > at {
            prev = self.nodes[prev].prev;
        }
        let next = match prev {
            NIL => std::mem::replace(&mut self.head, slot),
            _ => std::mem::replace(&mut self.nodes[prev].next, slot),
        };
        match next {
            NIL => self.tail = slot,
            _ => self.nodes[next].prev = slot,
        }
        let node = &mut self.nodes[slot];
        node.prev = prev;
        node.next = next;
    }

    pub(super) fn unlink(&mut self, slot: usize) {
        let Node { prev, next, .. } = self.nodes[slot];
        match prev {
            NIL => self.head = next,
            _ => self.nodes[prev].next = next,
        }
        match next {
            NIL => self.tail = prev,
            _ => self.nodes[next].prev = prev,
        }
    }

    pub(super) fn clear(&mut self) {
        *self = ByRefresh::default();
    }

    /// Once fewer than half of the slab's room holds entries (and it has
    /// room for more than [`SLAB_KEPT`]), moves the entries to a slab of
    /// 1.5 times their number, in refresh order, and returns where each
    /// old slot went (`NIL` for a free one). O(room), after at least a
    /// quarter of it was freed since the slab last grew or shrank.
    pub(super) fn compact_if_sparse(&mut self) -> Option<Vec<usize>> {
        let room = self.nodes.capacity();
        if room <= SLAB_KEPT || self.len * 2 >= room {
            return None;
        }
        let mut moved = vec![NIL; self.nodes.len()];
        let mut nodes = Vec::with_capacity(self.len + self.len / 2);
        let mut at = self.head;
        while at != NIL {
            let old = &mut self.nodes[at];
            let new = nodes.len();
            moved[at] = new;
            nodes.push(Node {
                name: old.name.take(),
                uid: old.uid.take(),
                refreshed: old.refreshed,
                prev: new.checked_sub(1).unwrap_or(NIL),
                next: if old.next == NIL { NIL } else { new + 1 },
            });
            at = old.next;
        }
        let len = nodes.len();
        debug_assert_eq!(len, self.len);
        *self = ByRefresh {
            nodes,
            head: if len == 0 { NIL } else { 0 },
            tail: len.checked_sub(1).unwrap_or(NIL),
            free: NIL,
            len,
        };
        Some(moved)
    }
}
