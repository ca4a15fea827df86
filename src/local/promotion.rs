//! Granting the waiters at the head of lines that may now go, after a
//! release, an expiry or a place that left.
//!
//! Invariant: the work is linear in the lines and holders involved,
//! however many waiters go at once and however many names were freed: the
//! waiters whose requests cover several names, from every line freed, are
//! granted in one batch, each waiter tried once and each line walked once
//! (see `table::spanning`), never one at a time with a pass over the whole
//! line for each, nor once per name freed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::time::Instant;

use super::table::{Line, Name, Notice, Place, Promotions};
use super::{deliver, LocalLocker};
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode, PushEvent};

/// Waiters known by uid and ticket.
type Waiters<'a> = HashSet<(&'a str, Ticket)>;

impl LocalLocker {
    /// Grants the waiters at the head of the lines of `names` that may now
    /// go, and pushes them the news.
    ///
    /// A place of a uid released or forced open here found on the way is
    /// dropped, and what is left of it on other names ended, which may move
    /// those lines on in turn (a released uid is refused every lock and
    /// wait from its release on, so a place left from before it, on a name
    /// the release did not cover, must not be granted either: nobody would
    /// unlock the entry, and its push would come after the confirmed
    /// release): a loop over the names each round frees, never a call into
    /// itself, as a chain of such places may be as long as the table
    /// (tens of thousands of links once overflowed a server's stack).
    pub(super) fn promote(&self, names: Vec<Name>, now: Instant) {
        let mut names = names;
        let mut now = now;
        while !names.is_empty() {
            let forced_out = self.promote_once(&names, now);
            names.clear();
            now = now.max(self.clock.now());
            self.end_forced_out(&forced_out, now, &mut names);
        }
    }

    /// Ends the places `forced_out` (a uid's and its ticket's: one request
    /// each) on their names, noting in `freed` the lines that moved. Their
    /// places on the names just promoted are gone already. Grouped by name,
    /// each line is passed once however many of them stand in it: ending
    /// them one at a time shifted the whole line behind each (4,000 such
    /// places at the head of a line of 44,000 took over a second).
    fn end_forced_out(
        &self,
        forced_out: &[(LockArgs, Ticket)],
        now: Instant,
        freed: &mut Vec<Name>,
    ) {
        // Each name once, with the first request that names it (its key
        // for the table) and the places to end there.
        let mut by_name: HashMap<&str, (Name, Waiters<'_>)> = HashMap::new();
        // Every line a request stood in hands it back: each request once,
        // or a request of many names costs their square.
        let mut requests = HashSet::new();
        for (args, ticket) in forced_out {
            if !requests.insert((&*args.uid, *ticket, Arc::as_ptr(&args.resources))) {
                continue;
            }
            super::table::count_steps(args.resources.len());
            for (pos, r) in args.resources.iter().enumerate() {
                by_name
                    .entry(r.as_str())
                    .or_insert_with(|| (Name::new(&args.resources, pos), HashSet::new()))
                    .1
                    .insert((&*args.uid, *ticket));
            }
        }
        for (resource, (name, places)) in by_name {
            let gone = |p: &Place| places.contains(&(&*p.args.uid, p.ticket));
            self.shards.with_one(resource, |shard| {
                // As every call does first: the line moves on past holders
                // whose time is up.
                shard.expire(now, self.config.validity, freed);
                shard.drop_places_where(name, &gone, freed);
            });
        }
    }

    /// One round of [`promote`](Self::promote): returns the places of
    /// forced uids it dropped whose requests cover other names too.
    fn promote_once(&self, names: &[Name], now: Instant) -> Vec<(LockArgs, Ticket)> {
        let mut out = Promotions::default();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut spanning = Vec::new();
        // Released or forced: either way its waits are refused now.
        let forced = |uid: &str| self.was_released(uid, now);
        for name in names.iter().filter(|name| seen.insert(name.as_str())) {
            self.shards
                .with_one(name, |shard| shard.promote(name, now, &forced, &mut out));
            spanning.append(&mut out.spanning);
        }
        if !spanning.is_empty() {
            // One batch for every name freed, each waiter once, oldest
            // first: a waiter at the head of many freed lines (a release
            // of 999 names) is tried once, not once per name.
            spanning.sort_unstable_by(|a, b| {
                (a.2, &a.0.uid)
                    .cmp(&(b.2, &b.0.uid))
                    .then_with(|| a.0.resources.cmp(&b.0.resources))
            });
            // One request once: the same waiter (uid and ticket) may keep
            // two requests on names they do not share, each its own.
            spanning.dedup_by(|a, b| {
                a.2 == b.2 && a.0.uid == b.0.uid && a.0.resources == b.0.resources
            });
            self.grant_spanning(&spanning, now, &forced, &mut out.notices);
        }
        deliver(out.notices);
        out.forced_out
    }

    /// Grants, in ticket order, each of `waiters` (places at the head of
    /// one line whose requests cover other names too) that every line it
    /// stands in lets in, counting the grants before it: all their shards
    /// locked at once, each line walked once.
    fn grant_spanning(
        &self,
        waiters: &[(LockArgs, LockMode, Ticket)],
        now: Instant,
        forced: &dyn Fn(&str) -> bool,
        notices: &mut Vec<Notice>,
    ) {
        // Every name the waiters cover, once.
        let mut position: HashMap<&str, usize> = HashMap::new();
        let mut names: Vec<String> = Vec::new();
        for (args, _, _) in waiters {
            for r in args.resources.iter() {
                position.entry(r.as_str()).or_insert_with(|| {
                    names.push(r.clone());
                    names.len() - 1
                });
            }
        }
        let names: Arc<[String]> = names.into();
        self.shards.with(&names, |set| {
            let mut lines: Vec<Option<Line>> = (0..names.len()).map(|_| None).collect();
            let mut places = Vec::new();
            for waiter @ (args, mode, _) in waiters {
                // Each name once: the arguments were validated.
                let of: Vec<usize> = args
                    .resources
                    .iter()
                    .map(|r| position[r.as_str()])
                    .collect();
                places.clear();
                let ready = of.iter().all(|&pos| {
                    let shard = set.shard(pos);
                    let line = lines[pos].get_or_insert_with(|| shard.line(&names[pos]));
                    let at = shard.lets_in(&names[pos], line, waiter, now, forced);
                    places.extend(at);
                    at.is_some()
                });
                if !ready {
                    continue;
                }
                // The wake its place on its first name carries, as
                // `waiting` keeps it for every name.
                let wake = set.shard(of[0]).wake_at(&names[of[0]], places[0]);
                for (&pos, &at) in of.iter().zip(&places) {
                    if let Some(line) = &mut lines[pos] {
                        line.take(at, &args.uid, *mode, wake.clone());
                    }
                }
                if let Some(wake) = wake {
                    notices.push(Notice {
                        wake,
                        uid: args.uid.clone(),
                        event: PushEvent::Granted,
                        names: Some(args.resources.clone()),
                    });
                }
            }
            for (pos, line) in lines.into_iter().enumerate() {
                if let Some(line) = line {
                    set.shard(pos).hold_line(&names[pos], line, now);
                }
            }
        });
    }
}
