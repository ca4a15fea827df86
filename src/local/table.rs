//! The holders of one resource inside a `LocalLocker`, and the rules for
//! changing them.

use std::sync::Arc;

use tokio::time::Instant;

use crate::{LockArgs, LockMode};

/// One grant on one resource.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) uid: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) source: Arc<str>,
    pub(super) acquired: Instant,
    pub(super) refreshed: Instant,
}

impl Entry {
    pub(super) fn new(args: &LockArgs, now: Instant) -> Self {
        Entry {
            uid: args.uid.clone(),
            owner: args.owner.clone(),
            source: args.source.clone(),
            acquired: now,
            refreshed: now,
        }
    }
}

/// Who holds a resource. A resource with no holders has no `Holders` at all:
/// the table removes it, so freed names never accumulate.
#[derive(Debug)]
pub(super) enum Holders {
    Writer(Entry),
    /// Never empty.
    Readers(Vec<Entry>),
}

impl Holders {
    pub(super) fn mode(&self) -> LockMode {
        match self {
            Holders::Writer(_) => LockMode::Write,
            Holders::Readers(_) => LockMode::Read,
        }
    }

    pub(super) fn entries(&self) -> &[Entry] {
        match self {
            Holders::Writer(e) => std::slice::from_ref(e),
            Holders::Readers(v) => v,
        }
    }

    /// Whether `uid` could be granted `mode` here without disturbing anyone.
    /// A uid that already holds the resource in the same mode may re-lock
    /// (idempotent); holding it in the other mode is a conflict.
    pub(super) fn admits(holders: Option<&Holders>, uid: &str, mode: LockMode) -> bool {
        match (holders, mode) {
            (None, _) => true,
            (Some(Holders::Writer(e)), LockMode::Write) => &*e.uid == uid,
            (Some(Holders::Writer(_)), LockMode::Read) => false,
            (Some(Holders::Readers(_)), LockMode::Read) => true,
            (Some(Holders::Readers(_)), LockMode::Write) => false,
        }
    }

    /// The holders of a free resource after granting `args.uid` in `mode`.
    pub(super) fn first(args: &LockArgs, mode: LockMode, now: Instant) -> Self {
        match mode {
            LockMode::Write => Holders::Writer(Entry::new(args, now)),
            LockMode::Read => Holders::Readers(vec![Entry::new(args, now)]),
        }
    }

    /// Adds a grant to a held resource after [`Holders::admits`] said yes.
    /// Re-granting to a uid that already holds it keeps the existing entry.
    pub(super) fn add(&mut self, args: &LockArgs, now: Instant) {
        if let Holders::Readers(v) = self {
            if !v.iter().any(|e| e.uid == args.uid) {
                v.push(Entry::new(args, now));
            }
        }
    }

    /// Removes the entry of `uid` if it holds the resource in `mode` (or in
    /// any mode when `mode` is `None`). Returns whether something was removed
    /// and whether the resource is now free.
    pub(super) fn remove(&mut self, uid: &str, mode: Option<LockMode>) -> (bool, bool) {
        if mode.is_some_and(|m| m != self.mode()) {
            return (false, false);
        }
        match self {
            Holders::Writer(e) => {
                let hit = &*e.uid == uid;
                (hit, hit)
            }
            Holders::Readers(v) => match v.iter().position(|e| &*e.uid == uid) {
                Some(pos) => {
                    v.swap_remove(pos);
                    (true, v.is_empty())
                }
                None => (false, false),
            },
        }
    }

    pub(super) fn find_mut(&mut self, uid: &str) -> Option<&mut Entry> {
        match self {
            Holders::Writer(e) => (&*e.uid == uid).then_some(e),
            Holders::Readers(v) => v.iter_mut().find(|e| &*e.uid == uid),
        }
    }
}
