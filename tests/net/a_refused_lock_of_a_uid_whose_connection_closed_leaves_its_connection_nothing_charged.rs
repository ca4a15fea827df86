//! docs/lock-servers.md, "Limits and memory": "A request the table refuses
//! takes nothing and refreshes nothing, so it leaves its uid's locks
//! counted by the connection that holds them, whichever connection it came
//! over."
//!
//! Connection 1 takes `u`'s lock on "a" and closes (its lock stays, for
//! the validity, counted in the total only). `v` holds "b". Over connection
//! 2, `u` asks for "b" and is refused. The ledger moved `u`'s charge to
//! connection 2 when it reserved the request, and the undo moves it back
//! only to a connection still open (`Inner::untouch`): connection 2 now
//! counts `u`'s lock, and under a limit of one lock per connection it is
//! refused its own first lock, although all it did was be refused. Real
//! time (sockets), every wait bounded.
#![cfg(feature = "net")]

use std::time::Duration;

use quorum_lock::net::ServerConfig;
use tokio::net::TcpStream;

use crate::node::{start, Node, TOKEN};
use crate::wire::{authenticate_as, call, lock_request, OP_LOCK, REPLY_BOOL, VERSION_6};

async fn connect(node: &Node) -> TcpStream {
    // Version 6: a version-2 client's refused lock keeps a place for its
    // next poll, which would count on that connection.
    authenticate_as(&node.addr, TOKEN, VERSION_6)
        .await
        .expect("authenticates")
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_lock_of_a_uid_whose_connection_closed_leaves_its_connection_nothing_charged() {
    let mut config = ServerConfig::new(TOKEN);
    config.max_entries_per_connection = 1;
    let node = start(config).await;
    let mut first = connect(&node).await;
    let mut other = connect(&node).await;
    let mut second = connect(&node).await;
    let lock = |id, uid, name| lock_request(id, OP_LOCK, uid, &[name]);
    assert_eq!(
        call(&mut first, 1, &lock(1, "u", "a")).await,
        [REPLY_BOOL, 1]
    );
    assert_eq!(
        call(&mut other, 1, &lock(1, "v", "b")).await,
        [REPLY_BOOL, 1]
    );
    drop(first);
    // The server notices the close (it holds no places to end).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        call(&mut second, 1, &lock(1, "u", "b")).await,
        [REPLY_BOOL, 0],
        "b is held by another uid"
    );
    assert_eq!(
        call(&mut second, 2, &lock(2, "w", "c")).await,
        [REPLY_BOOL, 1],
        "a connection allowed one lock, holding none (its only request was refused), is \
         granted a lock"
    );
}
