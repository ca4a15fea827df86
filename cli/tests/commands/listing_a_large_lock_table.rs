//! An admin listing the locks of a server on which one client (the
//! ordinary token) holds a few thousand locks, well within its limits per
//! connection: each entry carries the owner and source the client gave
//! (up to 512 bytes each), and a lock call may name 1000 resources, so four
//! calls make a listing of several MiB, over the 2 MiB frame limit. The
//! listing comes in pages (protocol version 6), so `locks` and `status`
//! list every entry; a client of version 5 or older, which cannot page,
//! is told why it gets no listing, and the client token may not page it.

use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{LockArgs, NetLocker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::wire::{
    authenticate_as, frame, read_frame, request, response, OP_LIST, OP_LIST_PAGE, REPLY_ERROR,
    VERSION_5, VERSION_6,
};
use crate::support::{cli, remote_config, Scratch, Server, ADMIN, TOKEN};

const LIMIT: Duration = Duration::from_secs(30);
const CALLS: usize = 4;
const NAMES: usize = 1000;

async fn roundtrip(stream: &mut TcpStream, payload: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(payload)).await.expect("send");
    tokio::time::timeout(Duration::from_secs(10), read_frame(stream, 4 << 20))
        .await
        .expect("a reply in time")
        .expect("a reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_lists_every_lock_of_a_client_that_holds_a_few_thousand() {
    let dir = Scratch::new("listing-a-large-lock-table");
    // A validity longer than the scene: its locks are never refreshed, and
    // the two listings on a busy machine can take longer than the tests'
    // usual 6 s (the version-5 listing then found the table empty).
    let server = Server::start_with_validity(&dir, "120s", &["--no-quarantine"]);
    let addr = server.addr.to_string();
    let locker = RemoteLocker::connect(addr.clone(), remote_config(TOKEN))
        .await
        .expect("connect with the client token");
    let owner = "o".repeat(500);
    let source = "s".repeat(500);
    for call in 0..CALLS {
        let resources: Vec<String> = (0..NAMES).map(|i| format!("flood/{call}/{i}")).collect();
        let args = LockArgs {
            uid: format!("00000000-0000-4000-8000-00000000000{call}").into(),
            resources: resources.into(),
            owner: owner.as_str().into(),
            source: source.as_str().into(),
            quorum: 1,
        };
        assert_eq!(locker.lock(&args).await, Ok(true), "lock call {call}");
    }

    let admin = dir.admin();
    let mut failed = Vec::new();
    for command in ["locks", "status"] {
        let args = [command, "--nodes", &addr, "--admin-token-file", &admin];
        let done = tokio::task::block_in_place(|| cli(&dir, &args, &[], LIMIT));
        let rows = done.stdout.lines().filter(|l| l.contains("flood/")).count();
        let last = format!("flood/{}/{} ", CALLS - 1, NAMES - 1);
        let listed = ["flood/0/0 ", &last]
            .iter()
            .all(|name| done.stdout.lines().any(|l| l.contains(name)));
        if done.code != Some(0) || rows != CALLS * NAMES || !listed {
            failed.push(format!(
                "{command} (exit {:?}) listed {rows} of {} locks: {}",
                done.code,
                CALLS * NAMES,
                done.stderr.trim()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));

    // A version-5 admin asks for the whole listing in one reply: refused,
    // saying why and what lists it.
    let (mut old, _) = authenticate_as(&addr, ADMIN, VERSION_5).await.unwrap();
    let reply = roundtrip(&mut old, &request(1, OP_LIST)).await;
    let (id, rest) = response(&reply);
    assert_eq!((id, rest[0]), (1, REPLY_ERROR), "{reply:?}");
    let reason = String::from_utf8_lossy(rest);
    assert!(
        reason.contains("over one reply") && reason.contains("protocol version 6"),
        "{reason}"
    );

    // The client token may not page the listing either.
    let (mut client, _) = authenticate_as(&addr, TOKEN, VERSION_6).await.unwrap();
    let reply = roundtrip(&mut client, &[2, OP_LIST_PAGE, 0]).await;
    let (id, rest) = response(&reply);
    assert_eq!((id, rest[0]), (2, REPLY_ERROR), "{reply:?}");
    assert!(
        String::from_utf8_lossy(rest).contains("needs the admin token"),
        "{reply:?}"
    );
}
