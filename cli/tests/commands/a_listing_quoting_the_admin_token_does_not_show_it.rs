//! Reproduces a past break: a lock server whose listing quotes the admin token (an owner, uid, source or name holding it) has `quorum-lock locks` print the token whole.
//!
//! docs/lock-servers.md, "Threat model": a hostile or misconfigured server
//! "already holds the token a client sent it; what it could still do is put
//! that token in the client's errors and logs, for whoever reads those, by
//! quoting it back", and any run of 8 or more bytes of a secret the process
//! handed a locker is shown as `***`. The library masks the words it puts
//! in its errors; the command line prints a listing's owner, uid, source
//! and name as the server sent them (escaped, never masked), so the admin
//! token the command was given is printed to the terminal, and into
//! whatever file or ticket the listing is pasted.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames: it welcomes any token as an admin and lists one lock
//! whose owner and source quote the admin token. Threads that end with
//! their connection; every read bounded in time.

use std::time::Duration;

use crate::support::listing::listing_server;
use crate::support::{cli, Scratch, ADMIN};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_listing_quoting_the_admin_token_does_not_show_it() {
    let node = listing_server(
        format!("ops ({ADMIN})"),
        format!("run: deploy --token {ADMIN}"),
    );
    let dir = Scratch::new("listing-quoting-the-admin-token");
    let admin = dir.admin();
    for command in ["locks", "status"] {
        let shown = cli(
            &dir,
            &[command, "--nodes", &node, "--admin-token-file", &admin],
            &[],
            LIMIT,
        );
        assert_eq!(shown.code, Some(0), "{command}: {shown:?}");
        assert!(
            shown.stdout.contains("reports"),
            "{command}: not listed: {shown:?}"
        );
        for piece in ADMIN.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            for (stream, text) in [("stdout", &shown.stdout), ("stderr", &shown.stderr)] {
                assert!(
                    !text.contains(piece),
                    "{command}: {stream} shows the admin token ({piece} is a piece of it): {text}"
                );
            }
        }
    }
}
