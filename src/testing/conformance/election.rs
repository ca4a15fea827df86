//! The election check: a proclamation stored with its holder's exclusive
//! entry, read back while the entry lives and never after, and a watch
//! pushed when the leader changes. Skipped for lockers without election.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{clean, expect, with_uid, Checked, Names, Outcome};
use crate::MAX_VALUE_LEN;
use crate::{Error, LockArgs, NetLocker, Proclamation, PushEvent, PushSink, Wake, WatchArgs};

/// How long the check waits for a pushed change.
const PUSH_WAIT: Duration = Duration::from_secs(5);

/// Pushes received by the check.
#[derive(Default)]
struct Inbox(Mutex<Vec<(String, PushEvent)>>);

impl PushSink for Inbox {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((uid.to_owned(), event));
    }
}

impl Inbox {
    fn changes_for(&self, uid: &str) -> usize {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(u, e)| u == uid && *e == PushEvent::Changed)
            .count()
    }

    /// Waits until `uid` has been pushed more than `seen` changes.
    async fn wait_past(&self, uid: &str, seen: usize, what: &str) -> Result<(), String> {
        tokio::time::timeout(PUSH_WAIT, async {
            while self.changes_for(uid) <= seen {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .map_err(|_| {
            format!("no `Changed` push for the watch of {uid} within {PUSH_WAIT:?} after {what}")
        })
    }
}

fn proclamation(term: u64, seq: u64, value: &[u8]) -> Proclamation {
    Proclamation {
        term,
        seq,
        value: Arc::from(value),
    }
}

async fn read(
    l: &dyn NetLocker,
    observer: &LockArgs,
    watch: Option<&WatchArgs>,
    what: &str,
    want: Option<&Proclamation>,
) -> Result<(), String> {
    match l.leader(observer, watch).await {
        Ok(got) if got.as_ref() == want => Ok(()),
        got => Err(format!(
            "leader() {what}: expected Ok({want:?}), got {got:?}"
        )),
    }
}

pub(super) async fn election(l: &dyn NetLocker, n: &Names) -> Checked {
    let (leader, next, reader) = (
        n.args("leader", &["e"]),
        n.args("next", &["e"]),
        n.args("reader", &["e"]),
    );
    let observer = n.args("observer", &["e"]);
    match l.leader(&observer, None).await {
        Err(err @ Error::Unsupported { .. }) => {
            return Ok(Outcome::Skipped(format!(
                "election is not supported: {err}"
            )))
        }
        Ok(None) => {}
        got => {
            return Err(format!(
                "leader() of a free resource: expected Ok(None), got {got:?}"
            ))
        }
    }
    let inbox = Arc::new(Inbox::default());
    let watch = WatchArgs {
        ttl: Duration::from_secs(30),
        wake: Wake::new(inbox.clone(), 0),
    };
    let first = proclamation(10, 0, b"node-a:1");
    // Binary-safe: NUL, 0xff and invalid UTF-8 must come back unchanged.
    let second = proclamation(10, 1, &[0, 0xff, b'b', 0xc3]);
    let result = async {
        expect("proclaim by a uid holding nothing", &leader, l.proclaim(&leader, &first), false).await?;
        expect("lock", &leader, l.lock(&leader), true).await?;
        read(l, &observer, None, "of a holder that proclaimed nothing", None).await?;
        read(l, &observer, Some(&watch), "registering a watch", None).await?;
        let seen = inbox.changes_for(&observer.uid);
        expect("proclaim by the holder", &leader, l.proclaim(&leader, &first), true).await?;
        inbox.wait_past(&observer.uid, seen, "a proclamation").await?;
        read(l, &observer, None, "after a proclamation", Some(&first)).await?;
        expect("a newer proclamation", &leader, l.proclaim(&leader, &second), true).await?;
        read(l, &observer, None, "after a newer proclamation", Some(&second)).await?;
        // A late retry of the older one answers that the newer one stands.
        expect("an older proclamation", &leader, l.proclaim(&leader, &first), true).await?;
        read(l, &observer, None, "after an older proclamation arrived late", Some(&second)).await?;
        let long = proclamation(10, 2, &vec![b'x'; MAX_VALUE_LEN + 1]);
        match l.proclaim(&leader, &long).await {
            Err(Error::InvalidArgument(_)) => {}
            got => {
                return Err(format!(
                    "proclaim of a value over {MAX_VALUE_LEN} bytes: expected InvalidArgument, got {got:?}"
                ))
            }
        }
        expect("proclaim by another uid", &next, l.proclaim(&next, &first), false).await?;
        read(l, &observer, Some(&watch), "registering a watch again", Some(&second)).await?;
        let seen = inbox.changes_for(&observer.uid);
        expect("unlock", &leader, l.unlock(&leader), true).await?;
        inbox.wait_past(&observer.uid, seen, "the leader's unlock").await?;
        read(l, &observer, None, "after the leader unlocked", None).await?;
        // The next holder does not inherit the old proclamation.
        expect("lock by the next", &next, l.lock(&next), true).await?;
        read(l, &observer, None, "of a new holder that proclaimed nothing", None).await?;
        let third = proclamation(11, 0, b"node-b");
        expect("proclaim by the next", &next, l.proclaim(&next, &third), true).await?;
        read(l, &observer, Some(&watch), "of the next leader", Some(&third)).await?;
        let seen = inbox.changes_for(&observer.uid);
        // Forcing a resource open is an admin's call; a client that may
        // not makes the leader unlock instead.
        let how = match l.force_unlock(&with_uid(&next, "")).await {
            Ok(true) => "a force-unlock",
            Ok(false) => return Err("force-unlock of a held resource answered Ok(false)".into()),
            Err(_) => {
                expect("unlock by the next", &next, l.unlock(&next), true).await?;
                "the next leader's unlock"
            }
        };
        inbox.wait_past(&observer.uid, seen, how).await?;
        read(l, &observer, None, &format!("after {how}"), None).await?;
        // Readers never lead.
        expect("rlock", &reader, l.rlock(&reader), true).await?;
        expect("proclaim by a reader", &reader, l.proclaim(&reader, &third), false).await?;
        read(l, &observer, None, "of a read-held resource", None).await?;
        expect("runlock", &reader, l.runlock(&reader), true).await?;
        Ok(Outcome::Passed)
    }
    .await;
    clean(l, &[&leader, &next, &reader]).await;
    result
}
