//! The ledger of a chaos run: every acquire attempt and every grant, as the
//! client saw it, and the checks that run over it at the end.
//!
//! A grant is held, in its client's view, from the moment `lock()`/`read()`
//! returned until the client began to unlock, or until `lost()` fired. Two
//! conflicting grants on a common resource whose held intervals overlap are
//! a violation: a *late loss* when the earlier one ended by its loss (the
//! lock went to someone else before its holder was told), a *mutual
//! exclusion violation* otherwise.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use quorum_lock::LockMode;

use crate::lock;
use tokio::time::Instant;

/// How a grant ended, in its holder's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Released,
    Lost,
}

#[derive(Debug, Clone)]
pub struct Grant {
    pub client: usize,
    pub uid: String,
    pub resources: Vec<String>,
    pub mode: LockMode,
    pub from: Instant,
    pub until: Instant,
    pub end: End,
    pub token: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub client: usize,
    pub at: Instant,
    /// When it was granted or gave up.
    pub ended: Instant,
    pub resources: Vec<String>,
    pub mode: LockMode,
    pub granted: bool,
    /// Why it was not granted: the error's text, or "lost at birth".
    pub failure: Option<String>,
}

#[derive(Default)]
pub struct Ledger {
    grants: Mutex<Vec<Grant>>,
    attempts: Mutex<Vec<Attempt>>,
    /// Tokens a resource's gate refused while their holder believed it
    /// held the lock.
    refused_tokens: Mutex<Vec<String>>,
    /// Guards that were already lost when `lock()`/`read()` returned them.
    lost_at_birth: std::sync::atomic::AtomicUsize,
}

impl Ledger {
    pub fn grant(&self, grant: Grant) {
        lock(&self.grants).push(grant);
    }

    pub fn attempt(&self, attempt: Attempt) {
        lock(&self.attempts).push(attempt);
    }

    pub fn refused_token(&self, what: String) {
        lock(&self.refused_tokens).push(what);
    }

    pub fn lost_at_birth(&self) {
        self.lost_at_birth
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn lost_at_birth_count(&self) -> usize {
        self.lost_at_birth
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn grants(&self) -> Vec<Grant> {
        lock(&self.grants).clone()
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        lock(&self.attempts).clone()
    }

    pub fn refused_tokens(&self) -> Vec<String> {
        lock(&self.refused_tokens).clone()
    }
}

/// Two grants that overlapped in conflicting modes on `resource`.
#[derive(Debug, Clone)]
pub struct Overlap {
    pub resource: String,
    pub earlier: Grant,
    pub later: Grant,
}

impl Overlap {
    pub fn is_late_loss(&self) -> bool {
        self.earlier.end == End::Lost
    }
}

/// `grants` by the resources each covers, each list in order of start.
fn by_resource<'a>(grants: impl Iterator<Item = &'a Grant>) -> HashMap<&'a str, Vec<&'a Grant>> {
    let mut by_resource: HashMap<&str, Vec<&Grant>> = HashMap::new();
    for grant in grants {
        for resource in &grant.resources {
            by_resource.entry(resource).or_default().push(grant);
        }
    }
    for list in by_resource.values_mut() {
        list.sort_by_key(|g| g.from);
    }
    by_resource
}

/// Every overlapping conflicting pair, per resource.
pub fn overlaps(grants: &[Grant]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (resource, list) in by_resource(grants.iter()) {
        // Grants still held, by end; a sweep in order of start.
        let mut open: Vec<&Grant> = Vec::new();
        for grant in list {
            open.retain(|g| g.until > grant.from);
            for earlier in &open {
                let conflict = earlier.mode == LockMode::Write || grant.mode == LockMode::Write;
                if conflict && earlier.uid != grant.uid {
                    found.push(Overlap {
                        resource: resource.to_owned(),
                        earlier: (*earlier).clone(),
                        later: grant.clone(),
                    });
                }
            }
            open.push(grant);
        }
    }
    found.sort_by_key(|o| o.later.from);
    found
}

/// Conflicting grants, one after the other on a resource, whose fencing
/// tokens did not grow: a writer's token must exceed every earlier token on
/// the resource, a reader's every earlier writer's.
pub fn token_regressions(grants: &[Grant]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (resource, list) in by_resource(grants.iter().filter(|g| g.token.is_some())) {
        let (mut any, mut writer): (Option<&Grant>, Option<&Grant>) = (None, None);
        for later in list {
            let bound = match later.mode {
                LockMode::Write => any,
                LockMode::Read => writer,
            };
            if let Some(earlier) = bound.filter(|e| e.token >= later.token) {
                found.push(Overlap {
                    resource: resource.to_owned(),
                    earlier: earlier.clone(),
                    later: later.clone(),
                });
            }
            if any.is_none_or(|a| later.token > a.token) {
                any = Some(later);
            }
            if later.mode == LockMode::Write && writer.is_none_or(|w| later.token > w.token) {
                writer = Some(later);
            }
        }
    }
    found
}

/// The failures among `attempts`, by reason, most common first.
pub fn failures(attempts: &[&Attempt]) -> Vec<(String, usize)> {
    let mut by: HashMap<String, usize> = HashMap::new();
    for failure in attempts.iter().filter_map(|a| a.failure.as_ref()) {
        *by.entry(failure.clone()).or_default() += 1;
    }
    let mut list: Vec<(String, usize)> = by.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list
}

/// Failed attempts that were, for part of their wait, behind one of
/// `stuck`: conflicting holders whose lock stayed on the servers after they
/// stopped using it (lost, or released while its client was cut off, so
/// the unlock never arrived). From the holder's last moment of belief until
/// the lock can have expired, `validity` later, nobody else can have it.
pub fn behind_stuck_holders(attempts: &[&Attempt], stuck: &[&Grant], validity: Duration) -> usize {
    attempts
        .iter()
        .filter(|a| !a.granted)
        .filter(|a| {
            stuck.iter().any(|g| {
                let conflict = g.mode == LockMode::Write || a.mode == LockMode::Write;
                let shared = g.resources.iter().any(|r| a.resources.contains(r));
                conflict && shared && g.until < a.ended && a.at < g.until + validity
            })
        })
        .count()
}

/// Share of attempts granted, with the count.
pub fn availability(attempts: &[&Attempt]) -> (f64, usize) {
    if attempts.is_empty() {
        return (f64::NAN, 0);
    }
    let granted = attempts.iter().filter(|a| a.granted).count();
    (granted as f64 / attempts.len() as f64, attempts.len())
}

pub fn offset(origin: Instant, at: Instant) -> Duration {
    at.saturating_duration_since(origin)
}
