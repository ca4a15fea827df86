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
//! from 10,000 up.
// Each program that includes this file uses what it needs of it.
#![allow(dead_code)]

use std::hash::{BuildHasher, RandomState};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};

/// The lowest port drawn.
const LOWEST: u32 = 10_000;

/// A random port below the ephemeral range, not checked; `None` when that
/// range starts too low to leave room (or cannot be read).
pub fn below_the_ephemeral_range() -> Option<u16> {
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let first: u32 = range.split_whitespace().next()?.parse().ok()?;
    if first <= LOWEST + 1_000 {
        return None;
    }
    let random = RandomState::new().hash_one(DRAWN.fetch_add(1, Ordering::Relaxed));
    u16::try_from(LOWEST + (random % u64::from(first - LOWEST)) as u32).ok()
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
