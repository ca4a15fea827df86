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
//! A locker that restarted has lost its counters. It draws no token for
//! `F = max(Q, FENCE_QUARANTINE)` after the restart (its quarantine `Q`, in
//! which it vouches for nothing, and at least four tolerances), and
//! afterwards never draws below its own wall clock. Every token it records
//! is at most its clock plus the tolerance `ε = FENCE_CLOCK_TOLERANCE`
//! (1 s, the same for every locker): its own draws are its clock or one
//! above a recorded token, and it refuses a floor further ahead than that,
//! so a hostile or broken client cannot push the counters towards
//! `u64::MAX`. So after a restart at `R`, its first token, drawn at `R + F`
//! or later, is at least its clock then, more than `F − ε ≥ 3ε` past every
//! token's clock it recorded before `R` (allowing its clock to step back by
//! `ε` across the restart), which is above every such token (at most that
//! clock plus `ε`). The argument uses only this locker's own clock:
//! lockers with different quarantines, validities or clients do not affect
//! it (earlier, a locker in quarantine answered tokens of its clock plus
//! its quarantine, which the floor round then wrote into lockers with
//! shorter ones), and the tolerance is a constant so that no
//! setting widens what a client may push.
//! Lockers must not count more than one token per nanosecond.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;

use crate::lock::acquisition::Acquisition;
use crate::lock::fanout::call_locker;
use crate::lock::telemetry::CallKind;
use crate::lock::wait_status::{RoundEnd, WaitStatus};
use crate::quorum::clock::after;
use crate::quorum::clock::nanos_of;
use crate::Error;

/// Draws the token of `state`'s lock: one round when a quorum agrees, two
/// when it does not.
///
/// A locker refuses a floor further ahead of its clock than
/// [`FENCE_CLOCK_TOLERANCE`](crate::FENCE_CLOCK_TOLERANCE). A token can be
/// that far ahead of its own locker's clock when a client pushed the
/// counter there (any holder may send any floor, up to that bound), and one
/// above it is then refused by a locker whose clock is not ahead. That
/// refusal is mended by time: the token is fixed, the clocks move on, so
/// the floor round is asked again every quarter tolerance until the
/// refresh timeout, instead of failing the holder at once.
pub(crate) async fn draw_token(state: &Arc<Acquisition>) -> Result<u64, Error> {
    // Each locker answers at least its own clock, and clocks read at
    // different instants differ, so a first ask with floor 0 never agrees
    // and always takes the second round below. A floor a little ahead of
    // this process's clock is answered exactly by every locker whose clock
    // is within that lead and whose counter is below it: one round. It is
    // a floor like any other (at most a locker's clock plus the tolerance,
    // or refused), so the argument above is unchanged; a locker whose clock
    // is behind this one's by more than the tolerance refuses it, and the
    // draw starts again from 0.
    let clock = &state.coord.clock;
    let lead = clock.wall_now().saturating_add(nanos_of(FLOOR_LEAD));
    let first = match ask(state, lead).await {
        Err(err) if err.is_floor_ahead() => ask(state, 0).await?,
        other => other?,
    };
    if first.agreed {
        return Ok(first.token);
    }
    // Lockers may answer more than `first.token` here; only `first.token`
    // is known to be recorded by a whole quorum now, so it is the token.
    let give_up = after(clock.now(), state.coord.timeouts.refresh);
    loop {
        match ask(state, first.token).await {
            Ok(_) => return Ok(first.token),
            Err(err) if err.is_floor_ahead() && clock.now() < give_up => {
                tracing::debug!(uid = %state.args.uid, %err, "fencing floor ahead of a locker's clock; asking again");
                clock.sleep(crate::FENCE_CLOCK_TOLERANCE / 4).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// How far ahead of this process's clock the first ask's floor is: more
/// than a request's trip to a locker, so that the floor is still ahead of
/// the locker's clock when it arrives, and far below the tolerance.
const FLOOR_LEAD: std::time::Duration = std::time::Duration::from_millis(2);

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
    let began = coord.clock.now();
    let deadline = after(began, coord.timeouts.refresh);
    let mut calls: FuturesUnordered<_> = coord
        .lockers
        .iter()
        .enumerate()
        .map(|(index, locker)| {
            let call = locker.fence(&state.args, state.mode, floor);
            let call = call_locker(coord, index, CallKind::Fence, call, deadline);
            async move { (index, call.await) }
        })
        .collect();
    let (mut tokens, mut not_held, mut failed) = (Vec::new(), 0, 0);
    let (mut last_err, mut permanent) = (None, None);
    // How each locker ended the draw, for the error of one that stops
    // short; calls still on their way when it stopped stay `Pending`.
    let mut ends = vec![RoundEnd::Pending; n];
    let mut draining = false;
    loop {
        // Once the draw has stopped, only the answers already in are read
        // (a refusal at once, say), so that the error names what is known.
        let next = if draining {
            match calls.next().now_or_never() {
                Some(next) => next,
                None => break,
            }
        } else {
            calls.next().await
        };
        let Some((index, mut result)) = next else {
            break;
        };
        // A locker that no longer honours the lease (it announced a
        // shorter validity) is not counted on: it counts as down, as in
        // every other round.
        if matches!(result, Ok(Some(_)))
            && let Err(err) = coord.honours_lease(index)
        {
            result = Err(err);
        }
        ends[index] = match &result {
            Ok(Some(_)) => RoundEnd::Counted,
            Ok(None) => RoundEnd::Declined,
            Err(err) => RoundEnd::Failed(err.clone()),
        };
        match result {
            Ok(Some(token)) => tokens.push((index, token)),
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
        if draining {
            continue;
        }
        // Tallied anew at each look: a locker may announce a shorter
        // validity after it answered.
        tokens.retain(|&(index, _)| {
            let honoured = coord.lease_honoured(index);
            if !honoured {
                failed += 1;
                if let Err(err) = coord.honours_lease(index) {
                    ends[index] = RoundEnd::Failed(err);
                }
            }
            honoured
        });
        if tokens.len() >= quorum {
            let token = tokens.iter().map(|&(_, t)| t).max().unwrap_or(floor);
            let agreed = tokens.iter().all(|&(_, t)| t == token);
            return Ok(Drawn { token, agreed });
        }
        if tokens.len() + (n - tokens.len() - not_held - failed) < quorum {
            draining = true;
        }
    }
    if not_held > n - quorum {
        return Err(Error::LockLost);
    }
    if let Some(err) = permanent {
        return Err(err);
    }
    tracing::debug!(uid = %state.args.uid, ?last_err, "fencing token not confirmed by a quorum");
    // Each locker judged as a wait judges it: a call still on its way
    // counts as answering unless a failure of its locker stands or it has
    // been silent too long; a refusal for quarantine that stands files its
    // locker as in quarantine. Only lockers that drew a token count as
    // answered: one that does not hold the lock vouches for nothing.
    Err(WaitStatus::of_round(coord, quorum, &ends, began).unavailable())
}
