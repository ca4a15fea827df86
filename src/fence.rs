//! Drawing the fencing token of a held lock from a quorum of lockers.
//!
//! # Why the token only ever grows between conflicting holders
//!
//! Each locker keeps, per resource, the latest token it handed out, and
//! hands out a token only to a uid that holds every resource of the lock
//! there. A holder asks every locker with floor 0; each locker that holds
//! it answers a token above everything it drew before on those resources
//! and records it. The holder takes the largest answer `T` of a quorum. When
//! those answers are not all equal, some locker of the quorum recorded less
//! than `T`, so the holder asks again with floor `T` until a quorum has
//! recorded at least `T`. Only then is `T` returned.
//!
//! Now take a later holder whose lock conflicts with this one. Its quorum
//! and the quorum that recorded `T` share a locker (a write quorum meets
//! every read and write quorum), and that locker recorded `T` while this
//! holder still held the lock there, so before it granted the later one. A
//! token the later holder draws there is therefore above `T`, and so is the
//! largest answer it takes.
//!
//! # Restarts, and why no setting can make a token go back
//!
//! A locker that restarted has lost its counters. It draws no token during
//! its quarantine `Q` (it vouches for nothing then, see `LocalLocker`), and
//! afterwards never draws below its own wall clock. Every token it records
//! is at most its clock plus its tolerance `ε = Q / 4`: its own draws are
//! its clock or one above a recorded token, and it refuses a floor further
//! ahead than that (a hostile or broken client cannot push the counters
//! towards `u64::MAX`). So after a restart at `R`, its first token, drawn at
//! `R + Q` or later, is at least its clock then, more than `Q − ε` past
//! every token it recorded before `R` (allowing its clock to step back by
//! `ε` across the restart), and `Q − ε > ε`. The argument uses only this
//! locker's own clock and quarantine: lockers with different quarantines,
//! validities or clients do not affect it (issue #21, break 3, was a
//! locker in quarantine answering tokens of its clock plus its quarantine,
//! which the floor round then wrote into lockers with shorter ones).
//! Lockers must not count more than one token per nanosecond.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::acquisition::Acquisition;
use crate::config::after;
use crate::fanout::call_locker;
use crate::telemetry::CallKind;
use crate::Error;

/// Draws the token of `state`'s lock: one round when a quorum agrees, two
/// when it does not.
pub(crate) async fn draw_token(state: &Arc<Acquisition>) -> Result<u64, Error> {
    let first = ask(state, 0).await?;
    if first.agreed {
        return Ok(first.token);
    }
    // Lockers may answer more than `first.token` here; only `first.token`
    // is known to be recorded by a whole quorum now, so it is the token.
    ask(state, first.token).await?;
    Ok(first.token)
}

struct Drawn {
    /// The largest token a quorum answered.
    token: u64,
    /// Every answer of that quorum was the same token.
    agreed: bool,
}

/// Asks every locker for a token of at least `floor`, and returns once a
/// quorum answered one.
async fn ask(state: &Arc<Acquisition>, floor: u64) -> Result<Drawn, Error> {
    let coord = &state.coord;
    let n = coord.lockers.len();
    let quorum = state.args.quorum;
    let deadline = after(Instant::now(), coord.timeouts.refresh);
    let mut calls: FuturesUnordered<_> = coord
        .lockers
        .iter()
        .enumerate()
        .map(|(index, locker)| {
            let call = locker.fence(&state.args, state.mode, floor);
            call_locker(coord, index, CallKind::Fence, call, deadline)
        })
        .collect();
    let (mut tokens, mut not_held, mut failed) = (Vec::new(), 0, 0);
    let (mut last_err, mut permanent) = (None, None);
    while let Some(result) = calls.next().await {
        match result {
            Ok(Some(token)) => tokens.push(token),
            Ok(None) => not_held += 1,
            // A locker that cannot draw tokens counts as one that failed:
            // the others may still make a quorum, whatever the order.
            Err(err) if !err.is_retryable() => {
                failed += 1;
                permanent = Some(err);
            }
            Err(err) => {
                failed += 1;
                last_err = Some(err);
            }
        }
        if tokens.len() >= quorum {
            let token = tokens.iter().copied().max().unwrap_or(floor);
            let agreed = tokens.iter().all(|t| *t == token);
            return Ok(Drawn { token, agreed });
        }
        if tokens.len() + (n - tokens.len() - not_held - failed) < quorum {
            break;
        }
    }
    if not_held > n - quorum {
        return Err(Error::LockLost);
    }
    if let Some(err) = permanent {
        return Err(err);
    }
    tracing::debug!(uid = %state.args.uid, ?last_err, "fencing token not confirmed by a quorum");
    Err(Error::QuorumUnavailable {
        answered: tokens.len() + not_held,
        quorum,
        lockers: n,
    })
}
