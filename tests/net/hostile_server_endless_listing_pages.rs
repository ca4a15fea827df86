//! A hostile lock server (a compromised one, or without TLS anyone who
//! answers in its place) "cannot reach beyond what the library returns"
//! (docs/lock-servers.md, "A hostile server"). Before protocol version 6
//! a listing was one reply, bounded by the frame limit; from version 6 it
//! comes in pages, and the client asks for the next page as long as the
//! server says `more`. PROTOCOL.md: "A page is the longest run of entries
//! in that order that fits about 1 MiB": a page that says `more` while
//! holding one entry of a few dozen bytes is no honest server's: the
//! client refuses it rather than let the server keep `NetLocker::locks`
//! (the CLI's `locks` and `status`) going, and growing, for as long as it
//! likes (which it did when paging came in).
#![cfg(feature = "net")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::wire::{
    accepted, duration, frame, read_frame, response, string, varint, OP_LIST_PAGE,
    REPLY_LOCKS_PAGE, VERSION_6,
};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::NetLocker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Pages the fake server answers with `more` before it lets the listing
/// end: an honest server would have put these 60-byte entries in one page.
const PAGES: u64 = 20_000;

/// `Response { id, reply: LocksPage { entries: [one write entry], more } }`.
fn one_entry_page(id: u64, n: u64, more: bool) -> Vec<u8> {
    let mut out = varint(id);
    out.push(REPLY_LOCKS_PAGE);
    out.extend(varint(1));
    out.extend(string(format!("name/{n:010}").as_bytes()));
    out.extend(string(b"uid"));
    out.extend(string(b"owner"));
    out.extend(string(b"source"));
    out.push(1); // WireMode::Write
    out.extend(duration(Duration::ZERO));
    out.extend(duration(Duration::ZERO));
    out.push(u8::from(more));
    out
}

/// Accepts any token at version 6 and answers every `ListPage` with a page
/// of one small entry after the last, saying `more`, [`PAGES`] times; then
/// a last page. Counts the pages it answered in `served`.
async fn endless_pages_server(served: Arc<AtomicU64>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move {
        while let Ok((mut peer, _)) = listener.accept().await {
            let served = served.clone();
            tokio::spawn(async move {
                if read_frame(&mut peer, 4096).await.is_err() {
                    return;
                }
                let welcome = frame(&accepted(VERSION_6, Duration::from_secs(30)));
                if peer.write_all(&welcome).await.is_err() {
                    return;
                }
                while let Ok(request) = read_frame(&mut peer, 1 << 20).await {
                    let (id, op) = response(&request);
                    if op.first() != Some(&OP_LIST_PAGE) {
                        continue;
                    }
                    let n = served.fetch_add(1, Ordering::SeqCst);
                    let page = frame(&one_entry_page(id, n, n + 1 < PAGES));
                    if peer.write_all(&page).await.is_err() {
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
async fn a_server_that_says_more_after_every_tiny_page_does_not_keep_the_listing_going() {
    let served = Arc::new(AtomicU64::new(0));
    let addr = endless_pages_server(served.clone()).await;
    let locker = RemoteLocker::connect(addr, RemoteConfig::new("admin-secret"))
        .await
        .expect("a locker");
    assert!(locker.is_online(), "the fake server accepted the handshake");
    let listed = locker.locks().await;
    let pages = served.load(Ordering::SeqCst);
    assert!(
        listed.is_err(),
        "the client asked for {pages} pages of one 60-byte entry each, every one saying \
         `more`, and returned a listing of {} entries: nothing bounds how long a hostile \
         server keeps a listing going, or how much it makes the client hold",
        listed.map_or(0, |l| l.len())
    );
}
