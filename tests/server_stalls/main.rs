//! A lock server whose table holds tens of thousands of holders or
//! waiters of one name, as clients with the ordinary token may make them
//! within their limits, does not stall on them: the admin's force of that
//! name, their expiry together, and the writer's release that lets them
//! all in each answer at once.
//!
//! Each scene times one call, so these live in a binary of their own (in
//! `tests/net`, tests that capture logs turn every tracing event on for
//! the whole process, which makes a debug build's server many times
//! slower), and they run one at a time (`HEAVY`): each is a few seconds'
//! work for a debug build.
#![cfg(feature = "net")]

#[allow(dead_code)]
#[path = "../net_support/capped.rs"]
mod capped;
#[allow(dead_code)]
#[path = "../net/node.rs"]
mod node;

/// Held by each scene, so that they run one at a time.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

mod forcing_open_a_name_many_readers_hold_does_not_stall_the_server;
mod read_locks_of_one_name_expiring_together_do_not_stall_the_server;
mod readers_waiting_on_one_name_are_granted_together_without_stalling;
