//! The rules of one `SqlLocker` call over the rows it loaded: who holds a
//! resource, who waits, whether a request is granted, queued or refused,
//! and which rows change. Pure: the transaction in `store.rs` loads the
//! rows under their row locks, a call decides here, and the changes it
//! records ([`Op`]) are written back before the commit.
//!
//! The rules are `LocalLocker`'s, as the Redis scripts state them: a
//! writer excludes everyone, readers share, a waiter with an older ticket
//! goes first, expired holders and places are dropped as they are seen.

use std::collections::BTreeMap;

use crate::LockMode;

/// One row of the entries table, as `Dialect::load` reads it.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub name: String,
    pub uid: String,
    /// `r` a resource's own row, `h` a holder, `q` a place in line, `e` the
    /// epoch marker.
    pub kind: String,
    pub mode: String,
    /// ms on the server's clock.
    pub deadline: i64,
    pub ticket: String,
    pub channel: String,
    /// A proclamation's stamp (term and seq, 20 digits each), or empty.
    pub stamp: String,
    /// A proclamation's value.
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub(super) struct Holder {
    pub mode: LockMode,
    pub deadline: i64,
    pub ticket: String,
    pub channel: String,
    pub stamp: String,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub(super) struct Place {
    pub ticket: String,
    pub mode: LockMode,
    pub channel: String,
}

/// The live state of one resource.
#[derive(Debug, Clone)]
pub(super) struct Resource {
    pub name: String,
    pub holders: BTreeMap<String, Holder>,
    pub places: BTreeMap<String, Place>,
    /// A holder or place went: the line may move.
    pub moved: bool,
}

/// A change to write before the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    /// A new holder row: name, uid, mode, deadline, ticket, channel, and
    /// the holder's owner and source when they are not the call's own (a
    /// waiter a release hands its turn to).
    Grant {
        name: String,
        uid: String,
        mode: LockMode,
        deadline: i64,
        ticket: String,
        channel: String,
        who: Option<(String, String)>,
    },
    /// A holder's new deadline (and the ticket and channel it waits by).
    Renew {
        name: String,
        uid: String,
        deadline: i64,
        ticket: String,
        channel: String,
    },
    /// A place in line, new or renewed.
    Place {
        name: String,
        uid: String,
        mode: LockMode,
        deadline: i64,
        ticket: String,
        channel: String,
    },
    /// A row that goes: name, uid, kind.
    Delete {
        name: String,
        uid: String,
        kind: char,
    },
    /// A holder's proclamation: its stamp and value.
    Proclaim {
        name: String,
        uid: String,
        stamp: String,
        value: Vec<u8>,
    },
    /// The node's new fencing high-water mark.
    Mark { token: i64 },
    /// A message for a waiter's locker: `T<uid>` its turn may have come,
    /// `W<uid>` an older waiter queued behind its grant.
    Notify { channel: String, payload: String },
}

pub(super) fn mode_char(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Write => "w",
        LockMode::Read => "r",
    }
}

fn parse_mode(text: &str) -> LockMode {
    if text == "w" {
        LockMode::Write
    } else {
        LockMode::Read
    }
}

/// The state of a call's resources, and the changes it made.
#[derive(Debug)]
pub(super) struct Table {
    /// ms on the server's clock.
    pub now: i64,
    pub resources: Vec<Resource>,
    pub ops: Vec<Op>,
}

impl Table {
    /// The resources `names` from `rows` (rows of other names ignored);
    /// expired holders and places are dropped, and their rows deleted.
    pub(super) fn load(names: &[String], rows: &[Row], now: i64) -> Table {
        let mut table = Table {
            now,
            resources: names
                .iter()
                .map(|name| Resource {
                    name: name.clone(),
                    holders: BTreeMap::new(),
                    places: BTreeMap::new(),
                    moved: false,
                })
                .collect(),
            ops: Vec::new(),
        };
        for row in rows {
            let Some(i) = names.iter().position(|n| *n == row.name) else {
                continue;
            };
            let kind = match row.kind.as_str() {
                "h" => 'h',
                "q" => 'q',
                _ => continue,
            };
            if row.deadline <= now {
                table.ops.push(Op::Delete {
                    name: row.name.clone(),
                    uid: row.uid.clone(),
                    kind,
                });
                table.resources[i].moved = true;
                continue;
            }
            let resource = &mut table.resources[i];
            if kind == 'h' {
                resource.holders.insert(
                    row.uid.clone(),
                    Holder {
                        mode: parse_mode(&row.mode),
                        deadline: row.deadline,
                        ticket: row.ticket.clone(),
                        channel: row.channel.clone(),
                        stamp: row.stamp.clone(),
                        value: row.value.clone(),
                    },
                );
            } else {
                resource.places.insert(
                    row.uid.clone(),
                    Place {
                        ticket: row.ticket.clone(),
                        mode: parse_mode(&row.mode),
                        channel: row.channel.clone(),
                    },
                );
            }
        }
        table
    }

    /// Records a message for a waiter's locker.
    fn notify(&mut self, channel: &str, kind: char, uid: &str) {
        if !channel.is_empty() {
            self.ops.push(Op::Notify {
                channel: channel.to_owned(),
                payload: format!("{kind}{uid}"),
            });
        }
    }

    /// Grants `uid` in `mode` on resource `i`, or renews its grant.
    pub(super) fn grant(
        &mut self,
        i: usize,
        uid: &str,
        mode: LockMode,
        deadline: i64,
        ticket: &str,
        channel: &str,
    ) {
        self.grant_as(i, uid, mode, deadline, ticket, channel, None);
    }

    /// [`grant`](Self::grant), a new holder's row written with `who` (owner
    /// and source) instead of the call's own when given.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn grant_as(
        &mut self,
        i: usize,
        uid: &str,
        mode: LockMode,
        deadline: i64,
        ticket: &str,
        channel: &str,
        who: Option<(String, String)>,
    ) {
        let r = &mut self.resources[i];
        match r.holders.get_mut(uid) {
            None => {
                r.holders.insert(
                    uid.to_owned(),
                    Holder {
                        mode,
                        deadline,
                        ticket: ticket.to_owned(),
                        channel: channel.to_owned(),
                        stamp: String::new(),
                        value: None,
                    },
                );
                self.ops.push(Op::Grant {
                    name: r.name.clone(),
                    uid: uid.to_owned(),
                    mode,
                    deadline,
                    ticket: ticket.to_owned(),
                    channel: channel.to_owned(),
                    who,
                });
            }
            Some(holder) => {
                // A re-grant names the channel the waiter listens on now, so
                // a grant made while it had none can still be wounded.
                holder.deadline = deadline;
                if !ticket.is_empty() && !channel.is_empty() {
                    holder.ticket = ticket.to_owned();
                    holder.channel = channel.to_owned();
                }
                let (ticket, channel) = (holder.ticket.clone(), holder.channel.clone());
                self.ops.push(Op::Renew {
                    name: r.name.clone(),
                    uid: uid.to_owned(),
                    deadline,
                    ticket,
                    channel,
                });
            }
        }
    }

    /// Renews what `uid` holds, and nothing else.
    pub(super) fn refresh_held(&mut self, uid: &str, deadline: i64) {
        for i in 0..self.resources.len() {
            if self.resources[i].holders.contains_key(uid) {
                let mode = self.resources[i].holders[uid].mode;
                self.grant(i, uid, mode, deadline, "", "");
            }
        }
    }

    /// Whether `uid` holds every resource (in `mode`, when given).
    pub(super) fn holds_all(&self, uid: &str, mode: Option<LockMode>) -> bool {
        self.resources.iter().all(|r| {
            r.holders
                .get(uid)
                .is_some_and(|h| mode.is_none_or(|m| h.mode == m))
        })
    }

    /// Drops `uid`'s entry on resource `i`; whether it had one.
    pub(super) fn release(&mut self, i: usize, uid: &str) -> bool {
        let r = &mut self.resources[i];
        if r.holders.remove(uid).is_none() {
            return false;
        }
        r.moved = true;
        self.ops.push(Op::Delete {
            name: r.name.clone(),
            uid: uid.to_owned(),
            kind: 'h',
        });
        true
    }

    /// Drops `uid`'s place on resource `i`, if it has one.
    pub(super) fn unplace(&mut self, i: usize, uid: &str) {
        let r = &mut self.resources[i];
        if r.places.remove(uid).is_some() {
            r.moved = true;
            self.ops.push(Op::Delete {
                name: r.name.clone(),
                uid: uid.to_owned(),
                kind: 'q',
            });
        }
    }

    /// Keeps a place for `uid` on resource `i`.
    pub(super) fn place(
        &mut self,
        i: usize,
        uid: &str,
        mode: LockMode,
        deadline: i64,
        ticket: &str,
        channel: &str,
    ) {
        let r = &mut self.resources[i];
        r.places.insert(
            uid.to_owned(),
            Place {
                ticket: ticket.to_owned(),
                mode,
                channel: channel.to_owned(),
            },
        );
        self.ops.push(Op::Place {
            name: r.name.clone(),
            uid: uid.to_owned(),
            mode,
            deadline,
            ticket: ticket.to_owned(),
            channel: channel.to_owned(),
        });
    }

    /// Tells the younger waiters granted in `mode`'s way on resource `i`
    /// to give their grant back if they do not hold the lock yet.
    pub(super) fn wound(&mut self, i: usize, mode: LockMode, ticket: &str) {
        let r = &self.resources[i];
        let held_mode = r.mode();
        let wounded: Vec<(String, String)> = r
            .holders
            .iter()
            .filter(|(_, h)| {
                !h.ticket.is_empty()
                    && h.ticket.as_str() > ticket
                    && !h.channel.is_empty()
                    && (held_mode == Some(LockMode::Write) || mode == LockMode::Write)
            })
            .map(|(uid, h)| (h.channel.clone(), uid.clone()))
            .collect();
        for (channel, uid) in wounded {
            self.notify(&channel, 'W', &uid);
        }
    }

    /// Tells the waiters at the head of each line that moved that their
    /// turn may have come, and deletes the rows of resources nobody holds
    /// or waits for.
    pub(super) fn finish(&mut self) {
        for i in 0..self.resources.len() {
            if self.resources[i].moved {
                for (channel, uid) in self.resources[i].turns() {
                    self.notify(&channel, 'T', &uid);
                }
            }
            let r = &self.resources[i];
            if r.holders.is_empty() && r.places.is_empty() {
                self.ops.push(Op::Delete {
                    name: r.name.clone(),
                    uid: String::new(),
                    kind: 'r',
                });
            }
        }
    }
}

impl Resource {
    /// The mode of the holders, if any.
    pub(super) fn mode(&self) -> Option<LockMode> {
        self.holders.values().next().map(|h| h.mode)
    }

    /// Whether the holders keep `uid` from holding in `mode`.
    pub(super) fn blocked(&self, uid: &str, mode: LockMode) -> bool {
        match self.mode() {
            None => false,
            Some(held) if held != mode => true,
            Some(_) => mode == LockMode::Write && !self.holders.contains_key(uid),
        }
    }

    /// Whether someone else waits in `mode`'s way with an older ticket
    /// (with any ticket, when `ticket` is `None`).
    pub(super) fn queued_before(&self, uid: &str, mode: LockMode, ticket: Option<&str>) -> bool {
        self.places.iter().any(|(other, p)| {
            other != uid
                && ticket.is_none_or(|t| p.ticket.as_str() < t)
                && (p.mode == LockMode::Write || mode == LockMode::Write)
        })
    }

    /// The waiters whose turn may have come, in ticket order, with the
    /// channel of each: the first writer when nobody holds, or the readers
    /// before the first writer while no writer holds.
    pub(super) fn turns(&self) -> Vec<(String, String)> {
        let mut line: Vec<(&String, &Place)> = self.places.iter().collect();
        line.sort_by(|a, b| a.1.ticket.cmp(&b.1.ticket));
        let mut out = Vec::new();
        for (i, (uid, p)) in line.into_iter().enumerate() {
            if p.mode == LockMode::Write {
                if i == 0 && self.holders.is_empty() && !p.channel.is_empty() {
                    out.push((p.channel.clone(), uid.clone()));
                }
                break;
            }
            if self.mode() == Some(LockMode::Write) {
                break;
            }
            if !p.channel.is_empty() {
                out.push((p.channel.clone(), uid.clone()));
            }
        }
        out
    }

    /// The live exclusive holder that proclaimed, if any.
    pub(super) fn leader(&self) -> Option<(&str, &Holder)> {
        if self.mode() != Some(LockMode::Write) {
            return None;
        }
        self.holders
            .iter()
            .find(|(_, h)| !h.stamp.is_empty())
            .map(|(uid, h)| (uid.as_str(), h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, uid: &str, kind: &str, mode: &str, deadline: i64, ticket: &str) -> Row {
        Row {
            name: name.into(),
            uid: uid.into(),
            kind: kind.into(),
            mode: mode.into(),
            deadline,
            ticket: ticket.into(),
            channel: "ch".into(),
            stamp: String::new(),
            value: None,
        }
    }

    #[test]
    fn expired_rows_are_dropped_and_deleted() {
        let names = vec!["a".to_string()];
        let rows = [
            row("a", "old", "h", "w", 5, ""),
            row("a", "new", "h", "r", 50, ""),
        ];
        let table = Table::load(&names, &rows, 10);
        assert!(!table.resources[0].holders.contains_key("old"));
        assert!(table.resources[0].moved);
        assert_eq!(table.resources[0].mode(), Some(LockMode::Read));
        assert!(table.ops.contains(&Op::Delete {
            name: "a".into(),
            uid: "old".into(),
            kind: 'h'
        }));
    }

    #[test]
    fn writers_exclude_and_readers_share() {
        let names = vec!["a".to_string()];
        let readers = [row("a", "r1", "h", "r", 50, "")];
        let table = Table::load(&names, &readers, 10);
        assert!(!table.resources[0].blocked("r2", LockMode::Read));
        assert!(table.resources[0].blocked("w", LockMode::Write));
        let writer = [row("a", "w", "h", "w", 50, "")];
        let table = Table::load(&names, &writer, 10);
        assert!(table.resources[0].blocked("r", LockMode::Read));
        assert!(!table.resources[0].blocked("w", LockMode::Write));
    }

    #[test]
    fn the_oldest_writer_is_told_its_turn_when_the_holder_goes() {
        let names = vec!["a".to_string()];
        let rows = [
            row("a", "holder", "h", "w", 50, ""),
            row("a", "young", "q", "w", 50, "2"),
            row("a", "old", "q", "w", 50, "1"),
        ];
        let mut table = Table::load(&names, &rows, 10);
        assert!(table.release(0, "holder"));
        table.finish();
        let told: Vec<&Op> = table
            .ops
            .iter()
            .filter(|op| matches!(op, Op::Notify { .. }))
            .collect();
        assert_eq!(
            told,
            [&Op::Notify {
                channel: "ch".into(),
                payload: "Told".into()
            }]
        );
    }

    #[test]
    fn readers_before_the_first_writer_are_all_told() {
        let names = vec!["a".to_string()];
        let rows = [
            row("a", "r1", "q", "r", 50, "1"),
            row("a", "r2", "q", "r", 50, "2"),
            row("a", "w", "q", "w", 50, "3"),
            row("a", "r3", "q", "r", 50, "4"),
        ];
        let table = Table::load(&names, &rows, 10);
        let turns: Vec<String> = table.resources[0]
            .turns()
            .into_iter()
            .map(|(_, uid)| uid)
            .collect();
        assert_eq!(turns, ["r1", "r2"]);
    }
}
