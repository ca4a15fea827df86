//! A listing (`NetLocker::locks`, the CLI's `locks` and `status`) that the
//! server answers with something other than a listing is not a listing:
//! "Refusal is safe, silence is not". A reply of the wrong kind to `List`
//! or `ListPage` must be an error that names it, as it is for every other
//! call, not an empty listing that reads as "this server holds no locks",
//! and never one that silently drops the pages already read. Nor is a
//! `health` answered so a healthy server that holds nothing.
#![cfg(feature = "net")]

use std::time::Duration;

use crate::wire::{
    accepted, duration, frame, read_frame, response, string, varint, OP_LIST, OP_LIST_PAGE,
    REPLY_BOOL, REPLY_LOCKS_PAGE, VERSION_5, VERSION_6,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::stand_in;
use tokio::net::TcpListener;

/// Entries on the first page: with 500-byte owners, over the 512 KiB a
/// page that says `more` must hold.
const ENTRIES: u64 = 1_000;

/// `Response { id, reply: LocksPage { entries, more: true } }`, a full
/// first page as an honest server sends it.
fn full_page(id: u64) -> Vec<u8> {
    let mut out = varint(id);
    out.push(REPLY_LOCKS_PAGE);
    out.extend(varint(ENTRIES));
    for n in 0..ENTRIES {
        out.extend(string(format!("name/{n:06}").as_bytes()));
        out.extend(string(b"uid"));
        out.extend(string(&[b'o'; 500]));
        out.extend(string(b"source"));
        out.push(1); // WireMode::Write
        out.extend(duration(Duration::ZERO));
        out.extend(duration(Duration::ZERO));
    }
    out.push(1); // more
    out
}

/// `Response { id, reply: Bool(true) }`.
fn bool_reply(id: u64) -> Vec<u8> {
    let mut out = varint(id);
    out.push(REPLY_BOOL);
    out.push(1);
    out
}

/// Accepts any token at `version`; answers the first `ListPage` with a
/// full page that says `more`, and every other `ListPage` or `List` with
/// `Bool(true)`.
async fn bool_answering_server(version: u16) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        while let Ok((mut peer, _)) = listener.accept().await {
            tokio::spawn(async move {
                if read_frame(&mut peer, 4096).await.is_err() {
                    return;
                }
                let welcome = frame(&accepted(version, Duration::from_secs(30)));
                if peer.write_all(&welcome).await.is_err() {
                    return;
                }
                let mut pages = 0;
                while let Ok(request) = read_frame(&mut peer, 1 << 20).await {
                    let (id, op) = response(&request);
                    let answer = match op.first() {
                        Some(&OP_LIST_PAGE) if pages == 0 => full_page(id),
                        Some(&OP_LIST_PAGE) | Some(&OP_LIST) => bool_reply(id),
                        _ => continue,
                    };
                    pages += 1;
                    if peer.write_all(&frame(&answer)).await.is_err() {
                        return;
                    }
                }
                let mut buf = [0u8; 64];
                while peer.read(&mut buf).await.unwrap_or(0) > 0 {}
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_listing_page_answered_with_a_bool_is_an_error_not_an_empty_listing() {
    let addr = bool_answering_server(VERSION_6).await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("admin-secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    let listed = locker.locks().await;
    assert!(
        listed.is_err(),
        "the server sent a page of {ENTRIES} entries that said more follow, then answered \
         the next ListPage with Bool(true); the client returned Ok with {} entries, a listing \
         that reads as complete",
        listed.map_or(0, |l| l.len())
    );
}

#[tokio::test]
async fn a_whole_listing_answered_with_a_bool_is_an_error_not_an_empty_listing() {
    let addr = bool_answering_server(VERSION_5).await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("admin-secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    let listed = locker.locks().await;
    assert!(
        listed.is_err(),
        "the version-5 server answered List with Bool(true); the client returned Ok with {} \
         entries, an empty listing instead of an error",
        listed.map_or(0, |l| l.len())
    );
}

#[tokio::test]
async fn a_health_call_answered_with_a_bool_is_an_error_not_a_healthy_empty_server() {
    let (listener, addr) = stand_in::bind().await;
    let server = tokio::spawn(stand_in::welcome_and_grant_every_connection(listener));
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    let health = locker.health().await;
    server.abort();
    assert!(
        health.is_err(),
        "the server answered Health with Bool(true); the client returned {health:?}, \
         (quarantined, entries) as from a healthy server that holds nothing"
    );
}
