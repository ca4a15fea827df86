//! `Observer`: a stream of an election's leader changes, told by the
//! lockers' pushes and checked again on a timer in case a push was lost.

use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use super::calls::{read_round, Watching, NEVER_ANSWERED};
use super::Leader;
use crate::lock::coordinator::Coordinator;
use crate::locker::wait::{PushEvent, PushSink};
use crate::LockArgs;

/// How many changes wait for a slow reader before the observer stops
/// reading the lockers until it catches up; it then reports the latest.
const BUFFERED: usize = 16;

/// The leader changes of one election, made by
/// [`Election::observe`](crate::Election::observe): `Some(leader)` when a
/// leader is elected or proclaims a new value (not when it proclaims the
/// value it has again, as the re-send after a cancelled proclaim does),
/// `None` when there is no
/// leader (it resigned, or its lease ran out and the lockers freed it).
///
/// The first item is the state when observing began. Items never go back
/// in time: once a leader (term, seq) was reported, neither it nor any
/// older one is reported again, also after a `None` (a read that lagged
/// behind an earlier one, or a locker that was partitioned still holding
/// an old leader's entry, cannot bring a gone leader back), through locker
/// restarts, partitions and reconnects. A leader is reported once a write
/// quorum of lockers holds its proclamation, so a copy of an old value
/// that a resign or a cancelled campaign left on fewer lockers, or a value
/// whose proclaim failed, is never reported. A change reaches the
/// observer with the lockers' push, and a push that is lost is made up
/// for by a re-check every `Timeouts::wait_recheck` (1 s by default). A
/// leadership that lasts longer than two reads is reported unless its
/// pushes or proclamations were lost or late, or a locker kept its lock
/// but refused its value (docs/election.md, what is not guaranteed); a shorter one can be
/// missed. A read takes as long as the slowest locker that answers takes
/// to answer it: a read that a push hurries waits for each locker twice
/// as long as its last answer took, also for one that has stopped since.
/// "No leader" is reported within a re-check after a quorum of lockers
/// freed the leader's lock when the pushes arrive; when they are lost,
/// within a re-check and a read (a read that a locker holds open ends
/// after `Timeouts::acquire`, 1 s by default).
/// While the answers do not settle who leads (too few lockers answer),
/// nothing new is reported; the observer keeps trying and reports again
/// when they do.
///
/// An observer reads the lockers from a task of its own on the runtime it
/// was made on, which ends when the observer is dropped. It is a
/// [`Stream`]; [`recv`](Self::recv) reads it without `StreamExt`.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
/// let election = ds.election("scheduler")?;
/// let mut observer = election.observe()?;
/// assert_eq!(observer.recv().await, Some(None)); // nobody leads yet
///
/// let mut leading = election.campaign(&b"node-a"[..]).await?;
/// let seen = observer.recv().await.flatten().expect("a leader");
/// assert_eq!((seen.term, &seen.value[..]), (leading.term(), &b"node-a"[..]));
///
/// leading.resign().await?;
/// assert_eq!(observer.recv().await, Some(None));
/// # Ok(())
/// # }
/// ```
pub struct Observer {
    changes: mpsc::Receiver<Option<Leader>>,
    task: JoinHandle<()>,
}

impl Observer {
    pub(super) fn start(coord: Arc<Coordinator>, args: LockArgs) -> Result<Observer, crate::Error> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| crate::Error::NoRuntime)?;
        let (tx, changes) = mpsc::channel(BUFFERED);
        let task = handle.spawn(watch(coord, args, tx));
        Ok(Observer { changes, task })
    }

    /// The next change: `Some(Some(leader))`, `Some(None)` for "no leader".
    /// `None` only if the observer's task ended (its runtime shut down).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change that was not returned stays for the next call.
    pub async fn recv(&mut self) -> Option<Option<Leader>> {
        self.changes.recv().await
    }
}

impl Stream for Observer {
    type Item = Option<Leader>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.changes.poll_recv(cx)
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

/// Wakes the observer's task when any locker pushes a change.
struct Bell(Notify);

impl PushSink for Bell {
    fn push(&self, _slot: usize, _uid: &str, event: PushEvent) {
        if event == PushEvent::Changed {
            self.0.notify_one();
        }
    }
}

/// What an observer has reported so far.
#[derive(Default)]
struct Reported {
    /// The newest (term, seq) reported; older ones are never reported.
    newest: Option<(u64, u64)>,
    /// The last item sent; `None` before the first.
    last: Option<Option<Leader>>,
}

impl Reported {
    /// What to send after a read found `found`, if anything.
    fn next(&mut self, found: Option<Leader>) -> Option<Option<Leader>> {
        if let Some(leader) = &found {
            let at = (leader.term, leader.seq);
            if self.newest.is_some_and(|newest| at <= newest) {
                // Reported already, or older than what was: a read that
                // lagged behind an earlier one. After a `None` this would
                // bring back a leader that is gone.
                return None;
            }
            self.newest = Some(at);
            if let Some(Some(last)) = &self.last
                && last.term == leader.term
                && last.value == leader.value
            {
                // The same leader proclaiming the value it has (the
                // re-send after a cancelled proclaim): no change.
                self.last = Some(found);
                return None;
            }
        }
        if self.last.as_ref() == Some(&found) {
            return None;
        }
        self.last = Some(found.clone());
        Some(found)
    }
}

/// Reads the leader again and again: after every push, and at least every
/// re-check. One read at a time, so results come in the order the reads
/// saw the lockers. A push that arrives while a read still waits for
/// answers cuts it at once, so that a short leadership is seen, unless
/// the read before was cut or ended unsettled: then the push lets the read
/// run until a write quorum of lockers answered and each locker still
/// silent had twice as long as its last answer took (it ends then even if
/// the answers do not settle who leads, rather than wait for a stopped
/// locker until its deadline, while a slow one that may settle it gets its
/// time), or until it ran a re-check, and another follows at once. So pushes that come faster than a read takes do not
/// keep every read from finishing (every other read gets its quorum of
/// answers), and a stopped locker does not hold a read past a hand-over.
async fn watch(coord: Arc<Coordinator>, args: LockArgs, tx: mpsc::Sender<Option<Leader>>) {
    let bell = Arc::new(Bell(Notify::new()));
    let sink: Arc<dyn PushSink> = bell.clone();
    let recheck = coord.wait_recheck();
    let ttl = coord.place_ttl();
    let mut reported = Reported::default();
    let took: Arc<[AtomicU64]> = (0..coord.lockers.len())
        .map(|_| AtomicU64::new(NEVER_ANSWERED))
        .collect();
    // Whether the previous read was cut short or ended unsettled: the next
    // one is then not cut before a quorum answered, so that a stream of
    // pushes cannot keep every read from finishing.
    let mut cut = false;
    loop {
        let began = tokio::time::Instant::now();
        let mut pushed = false;
        let cut_at_once = !cut;
        // Per read, so that a notice meant for one read cannot end the next.
        let hurry = Notify::new();
        let watching = Watching {
            sink: &sink,
            ttl,
            hurry: &hurry,
            took: &took,
        };
        let read = read_round(&coord, &args, Some(watching));
        tokio::pin!(read);
        let read = loop {
            tokio::select! {
                read = &mut read => break Some(read),
                () = bell.0.notified(), if !pushed => {
                    if cut_at_once {
                        break None;
                    }
                    pushed = true;
                    hurry.notify_one();
                }
                () = tokio::time::sleep_until(began + recheck), if pushed => break None,
                () = tx.closed() => return,
            }
        };
        cut = !matches!(read, Some(Ok(_)));
        match read {
            // Cut: a push came at once, or after the read ran a re-check.
            None => continue,
            Some(Ok(reading)) => {
                let found = reading.leader.map(Leader::from);
                if let Some(change) = reported.next(found)
                    && tx.send(change).await.is_err()
                {
                    return;
                }
            }
            Some(Err(err)) => {
                tracing::debug!(resource = %args.resources[0], %err, "cannot read the leader; trying again");
            }
        }
        if pushed {
            // A change came while the read ran: read again at once.
            continue;
        }
        // Re-checks are a re-check apart from where the last read began, so
        // that a read held open by a locker that does not answer does not
        // push the next one a whole re-check further.
        tokio::select! {
            () = bell.0.notified() => {}
            () = tokio::time::sleep_until(began + recheck) => {}
            () = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(term: u64, seq: u64) -> Option<Leader> {
        with_value(term, seq, &format!("v{seq}"))
    }

    fn with_value(term: u64, seq: u64, value: &str) -> Option<Leader> {
        Some(Leader {
            term,
            seq,
            value: Arc::from(value.as_bytes()),
        })
    }

    #[test]
    fn reports_each_change_once_and_never_an_older_or_equal_leader_again() {
        let mut r = Reported::default();
        assert_eq!(r.next(None), Some(None));
        assert_eq!(r.next(None), None);
        assert_eq!(r.next(leader(5, 0)), Some(leader(5, 0)));
        assert_eq!(r.next(leader(5, 0)), None);
        assert_eq!(r.next(leader(5, 1)), Some(leader(5, 1)));
        assert_eq!(r.next(leader(5, 0)), None, "older value of the same term");
        assert_eq!(r.next(None), Some(None));
        assert_eq!(r.next(leader(4, 9)), None, "older term after no leader");
        assert_eq!(
            r.next(leader(5, 1)),
            None,
            "the same leader after no leader"
        );
        assert_eq!(r.next(leader(7, 0)), Some(leader(7, 0)));
        assert_eq!(
            r.next(with_value(7, 1, "v0")),
            None,
            "the value it has, proclaimed again"
        );
        assert_eq!(r.next(leader(7, 0)), None, "older than the re-send");
        assert_eq!(r.next(leader(7, 2)), Some(leader(7, 2)));
        assert_eq!(r.next(None), Some(None));
        assert_eq!(
            r.next(with_value(8, 0, "v2")),
            Some(with_value(8, 0, "v2")),
            "a new term with the same value is a new leader"
        );
    }
}
