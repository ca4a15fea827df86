//! Loopback ports for servers a test may kill and start again on the same
//! port (the clients' node lists name it).
//!
//! A port of the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`), once its server is down,
//! may be taken by any outgoing connection or `bind` to port 0 of any test
//! running beside it, and then stay taken for as long as that socket
//! lives: a restart of a command-line test's servers once found its port
//! in use for the whole 10 s it retried. Below that range no socket takes
//! a port unless it names it, so these ports are drawn there, at random,
//! from 10,000 up, and a program never draws the same port twice: a test
//! that kills a server and checks that its clients find no quorum must
//! not meet another test's server on that port (a `run` once got its
//! quorum during such an outage with sixteen tests at a time; every test
//! server takes the same token).
// Each program that includes this file uses what it needs of it.
#![allow(dead_code)]

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The lowest port drawn.
const LOWEST: u32 = 10_000;

/// A random port below the ephemeral range that this program has not drawn
/// before, not checked; `None` when that range starts too low to leave
/// room (or cannot be read). After 1,000 draws that all met ports drawn
/// before (a program draws a few hundred of some 20,000), it gives the
/// last one anyway.
pub fn below_the_ephemeral_range() -> Option<u16> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static DRAWN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let first: u32 = range.split_whitespace().next()?.parse().ok()?;
    if first <= LOWEST + 1_000 {
        return None;
    }
    let mut drawn = DRAWN.lock().unwrap_or_else(|e| e.into_inner());
    let drawn = drawn.get_or_insert_with(HashSet::new);
    let mut port = None;
    for _ in 0..1_000 {
        let random = RandomState::new().hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
        let candidate = u16::try_from(LOWEST + (random % u64::from(first - LOWEST)) as u32).ok()?;
        port = Some(candidate);
        if drawn.insert(candidate) {
            break;
        }
    }
    port
}

/// A free port below the ephemeral range (checked by binding it), or one
/// the kernel hands out when there is no room below it.
pub fn restartable_port() -> u16 {
    for _ in 0..50 {
        let Some(port) = below_the_ephemeral_range() else {
            break;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}
