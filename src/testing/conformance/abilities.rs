//! The checks of abilities a locker may lack, skipped when it does:
//! listing its entries, waiting in line with pushed grants, and fencing
//! tokens.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{clean, expect, Checked, Names, Outcome};
use crate::{Error, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs};
use crate::{WaitReply, Wake};

/// How long the waiting check waits for a pushed grant.
const PUSH_WAIT: Duration = Duration::from_secs(5);

pub(super) async fn listing(l: &dyn NetLocker, n: &Names) -> Checked {
    let (w, r) = (n.args("w", &["x"]), n.args("r", &["y", "z"]));
    let result = async {
        expect("lock", &w, l.lock(&w), true).await?;
        expect("rlock", &r, l.rlock(&r), true).await?;
        let listed = match l.locks().await {
            Ok(listed) => listed,
            Err(err) => return Ok(Outcome::Skipped(format!("listing failed: {err}"))),
        };
        let mut ours: Vec<(String, String, LockMode)> = listed
            .into_iter()
            .filter(|i| i.resource.starts_with(&n.prefix))
            .map(|i| (i.resource, i.uid, i.mode))
            .collect();
        ours.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        let mut want = vec![
            (w.resources[0].clone(), w.uid.to_string(), LockMode::Write),
            (r.resources[0].clone(), r.uid.to_string(), LockMode::Read),
            (r.resources[1].clone(), r.uid.to_string(), LockMode::Read),
        ];
        want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        if ours != want {
            return Err(format!("listing: expected {want:?}, got {ours:?}"));
        }
        expect("unlock", &w, l.unlock(&w), true).await?;
        expect("runlock", &r, l.runlock(&r), true).await?;
        Ok(Outcome::Passed)
    }
    .await;
    clean(l, &[&w, &r]).await;
    result
}

/// Pushes received by a waiting check.
#[derive(Default)]
struct Inbox(Mutex<Vec<(usize, String, PushEvent)>>);

impl PushSink for Inbox {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((slot, uid.to_owned(), event));
    }
}

impl Inbox {
    fn granted(&self, uid: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(_, u, e)| u == uid && *e == PushEvent::Granted)
    }
}

pub(super) async fn waiting(l: &dyn NetLocker, n: &Names) -> Checked {
    if !l.queues() {
        return Ok(Outcome::Skipped(
            "the locker keeps no places in line (`queues()` is false); waiters poll".into(),
        ));
    }
    let (holder, first, second) = (
        n.args("holder", &["x"]),
        n.args("first", &["x"]),
        n.args("second", &["x"]),
    );
    let inbox = Arc::new(Inbox::default());
    let older = Ticket { at: 1, tiebreak: 1 };
    let younger = Ticket { at: 2, tiebreak: 1 };
    let wait = |ticket, slot| WaitArgs {
        ticket,
        place_ttl: Duration::from_secs(30),
        wake: Some(Wake::new(inbox.clone(), slot)),
    };
    let asked = |what: &str, args: &LockArgs, got: Result<WaitReply, Error>, want: WaitReply| {
        if matches!(&got, Ok(g) if *g == want) {
            Ok(())
        } else {
            Err(format!(
                "{what} by uid {}: expected Ok({want:?}), got {got:?}",
                args.uid
            ))
        }
    };
    let result = async {
        expect("lock", &holder, l.lock(&holder), true).await?;
        // The younger waiter asks first: the order is the tickets', not the arrival's.
        let got = l
            .lock_wait(&second, LockMode::Write, &wait(younger, 2))
            .await;
        asked("lock_wait behind a holder", &second, got, WaitReply::Queued)?;
        let got = l.lock_wait(&first, LockMode::Write, &wait(older, 1)).await;
        asked("lock_wait behind a holder", &first, got, WaitReply::Queued)?;
        let stranger = n.args("stranger", &["x"]);
        expect(
            "plain lock while others wait",
            &stranger,
            l.lock(&stranger),
            false,
        )
        .await?;
        expect("unlock of the holder", &holder, l.unlock(&holder), true).await?;
        let pushed = tokio::time::timeout(PUSH_WAIT, async {
            while !inbox.granted(&first.uid) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        if pushed.is_err() {
            return Err(format!(
                "no Granted push reached the oldest waiter within {PUSH_WAIT:?} of the unlock"
            ));
        }
        if inbox.granted(&second.uid) {
            return Err("the younger waiter was pushed a grant beside the older writer".into());
        }
        expect(
            "refresh of the pushed grant",
            &first,
            l.refresh(&first),
            true,
        )
        .await?;
        expect("unlock of the pushed grant", &first, l.unlock(&first), true).await?;
        // Its turn has come now. A locker may grant it in the unlock itself
        // or just after; either way the grant is pushed.
        let pushed = tokio::time::timeout(PUSH_WAIT, async {
            while !inbox.granted(&second.uid) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        if pushed.is_err() {
            return Err(format!(
                "no Granted push reached the next waiter within {PUSH_WAIT:?} of the unlock"
            ));
        }
        expect(
            "unlock of the younger waiter",
            &second,
            l.unlock(&second),
            true,
        )
        .await
    }
    .await;
    clean(l, &[&holder, &first, &second]).await;
    result.map(|()| Outcome::Passed)
}

pub(super) async fn fencing(l: &dyn NetLocker, n: &Names) -> Checked {
    let (w, w2) = (n.args("w", &["x"]), n.args("w2", &["x"]));
    let result = async {
        expect("lock", &w, l.lock(&w), true).await?;
        let t1 = match l.fence(&w, LockMode::Write, 0).await {
            Ok(Some(t)) => t,
            Err(Error::Unsupported { .. }) => {
                return Ok(Outcome::Skipped(
                    "the locker draws no fencing tokens".into(),
                ))
            }
            other => {
                return Err(format!(
                    "fence by the holder: expected a token, got {other:?}"
                ))
            }
        };
        let stranger = n.args("stranger", &["x"]);
        match l.fence(&stranger, LockMode::Write, 0).await {
            Ok(None) => {}
            other => {
                return Err(format!(
                    "fence by a stranger: expected Ok(None), got {other:?}"
                ))
            }
        }
        expect("unlock", &w, l.unlock(&w), true).await?;
        expect("lock by the next holder", &w2, l.lock(&w2), true).await?;
        let t2 = match l.fence(&w2, LockMode::Write, 0).await {
            Ok(Some(t)) if t > t1 => t,
            other => {
                return Err(format!(
                    "fence by the next holder: expected a token above {t1}, got {other:?}"
                ))
            }
        };
        let floor = t2.saturating_add(1000);
        match l.fence(&w2, LockMode::Write, floor).await {
            Ok(Some(t)) if t >= floor => {}
            other => {
                return Err(format!(
                    "fence with floor {floor}: expected a token at least the floor, got {other:?}"
                ))
            }
        }
        expect("unlock", &w2, l.unlock(&w2), true).await?;
        Ok(Outcome::Passed)
    }
    .await;
    clean(l, &[&w]).await;
    result
}
