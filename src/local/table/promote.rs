//! Granting the places at the head of a name's line once its holders
//! allow them (a writer's release may let tens of thousands of readers in
//! at once).
//!
//! Invariant: the work is linear in the line and the holders, however
//! many are granted together: the places leave the line in one pass, and
//! a reader already holding is found through the readers' index.

use tokio::time::Instant;

use super::{Entry, Holders, Name, Notice, Place, Promotions, Readers, Shard};
use crate::locker::wait::PushEvent;
use crate::LockMode;

impl Shard {
    /// Grants the places at the head of `resource`'s line that its holders
    /// now allow: the oldest waiter, and with it every reader queued before
    /// the first writer when it reads. Places that cover other resources
    /// too are handed back in `out.spanning` to be tried across shards.
    ///
    /// A place of a uid `forced` names (released or forced open here, whose
    /// waits are refused) is dropped from the line wherever the pass meets
    /// it, before the holders are asked whether they allow it: it will
    /// never be granted, so it stops nobody behind it (a released writer's
    /// place among readers lets the readers after it in with those before
    /// it). Its places on other names are handed back in `out.forced_out`,
    /// to be ended there. One pass, and one more to take the places out:
    /// linear in the places passed, however many are dropped.
    pub(in crate::local) fn promote(
        &mut self,
        name: &Name,
        now: Instant,
        forced: &dyn Fn(&str) -> bool,
        out: &mut Promotions,
    ) {
        let resource = name.as_str();
        let Some(res) = self.map.get_mut(resource) else {
            return;
        };
        res.queue.retain(|p| p.expires > now);
        let mut grants = Vec::new();
        let mut dropped = Vec::new();
        let mut mode = res.holders.as_ref().map(Holders::mode);
        for (at, place) in res.queue.iter().enumerate() {
            if forced(&place.args.uid) {
                dropped.push(at);
                continue;
            }
            let allowed = matches!(
                (mode, place.mode),
                (None, _) | (Some(LockMode::Read), LockMode::Read)
            );
            if !allowed {
                break;
            }
            mode = Some(place.mode);
            if place.wake.is_none() {
                // A reservation keeps its turn until its waiter asks again.
                continue;
            }
            if place.args.resources.iter().all(|r| r.as_str() == resource) {
                grants.push(at);
            } else {
                out.spanning
                    .push((place.args.clone(), place.mode, place.ticket));
            }
            if place.mode == LockMode::Write {
                break;
            }
        }
        if !dropped.is_empty() {
            // Out in one pass; the grants' positions move up past them.
            for place in res.queue.take_at(&dropped) {
                if place.args.resources.len() > 1 {
                    out.forced_out.push((place.args, place.ticket));
                }
            }
            for at in &mut grants {
                let before = dropped.partition_point(|&d| d < *at);
                *at -= before;
            }
        }
        if grants.is_empty() {
            // Its expired places gone, a name nobody holds or waits for
            // leaves the table (nothing else would look at it again).
            if res.holders.is_none() && res.queue.is_empty() {
                self.settle_name(name.clone(), &mut Vec::new());
                // As after every removal from the map.
                self.fit();
            }
            return;
        }
        let places = self.take_places(resource, &grants);
        out.notices.extend(places.iter().filter_map(|place| {
            Some(Notice {
                wake: place.wake.clone()?,
                uid: place.args.uid.clone(),
                event: PushEvent::Granted,
                names: Some(place.args.resources.clone()),
            })
        }));
        self.hold(resource, places, now);
    }
}

impl Shard {
    /// Takes the places at positions `at` (ascending) out of `resource`'s
    /// line, with every other place their waiters keep there, in one pass.
    pub(super) fn take_places(&mut self, resource: &str, at: &[usize]) -> Vec<Place> {
        let Some(res) = self.map.get_mut(resource) else {
            return Vec::new();
        };
        // A waiter keeps one place per name, known by its uid or its
        // ticket (the line's invariant): taking its place there takes all.
        res.queue.take_at(at)
    }

    /// Makes the waiters of `places`, taken out of `resource`'s line, its
    /// holders, each with its place's wake; one already holding it (a
    /// repeated request) keeps its entry with the newest wake. Its holders
    /// must allow them all (checked by the caller).
    ///
    /// In linear time however many are granted at once (a writer's release
    /// may let tens of thousands of readers in): the readers already
    /// holding are found through the readers' index by uid, not a search
    /// of every reader for each.
    pub(super) fn hold(&mut self, resource: &str, places: Vec<Place>, now: Instant) {
        // The map's own key: the expiry index keys entries as the map does.
        let key = match self.map.get_key_value(resource) {
            Some((key, _)) => key.clone(),
            None => return,
        };
        let Some(res) = self.map.get_mut(resource) else {
            return;
        };
        for place in places {
            let again = res
                .holders
                .as_mut()
                .and_then(|h| h.find_mut(&place.args.uid));
            if let Some(e) = again {
                // Granted already (a repeated request): the newest wake.
                if place.wake.is_some() {
                    e.wake = place.wake;
                }
                continue;
            }
            if matches!(res.holders, Some(Holders::Writer(_))) {
                // Not allowed: the caller checked the holders.
                continue;
            }
            let entry = Entry {
                uid: place.args.uid.clone(),
                owner: place.args.owner.clone(),
                source: place.args.source.clone(),
                acquired: now,
                refreshed: now,
                slot: self
                    .by_refresh
                    .push(key.clone(), place.args.uid.clone(), now),
                ticket: Some(place.ticket),
                wake: place.wake,
            };
            match &mut res.holders {
                Some(Holders::Readers(v)) => v.push(entry),
                _ => {
                    res.holders = Some(match place.mode {
                        LockMode::Write => Holders::Writer(entry),
                        LockMode::Read => Holders::Readers(Readers::new(entry)),
                    });
                }
            }
        }
    }
}

impl Notice {
    /// Pushes it to its waiter: a grant with the names it granted.
    pub(in crate::local) fn deliver(self) {
        match &self.names {
            Some(names) => self.wake.notify_granted(&self.uid, names),
            None => self.wake.notify(&self.uid, self.event),
        }
    }
}
