//! Reproduces a past break: a lock server whose listing holds an owner of more than 65,535 characters makes `quorum-lock locks` panic (`Formatting argument out of range`) and exit 101, listing nothing of any node.
//!
//! docs/cli.md: "What the nodes send is shown escaped ... nothing a node
//! sends can add a row, move the cursor, retitle or clear the terminal";
//! `--per-node` "works however many nodes are down", and a listing with a
//! quorum names the nodes that did not answer and exits 0. A node's
//! listing is its words, which a hostile or older node (or another user of
//! the same Redis or database, writing the entries) chooses.
//!
//! What happens instead: the command aligns its columns with
//! `format!("{cell:<width$}")` (`cli/src/admin.rs`, `table`), and the
//! standard library panics on a width above `u16::MAX`. One cell of 70,000
//! characters in a column other than the last (OWNER here) ends the
//! command with a panic: the operator sees no listing at all, of that node
//! or any other.
//!
//! The server is a stand-in on a loopback port speaking protocol version 5
//! in raw frames; its one lock has an owner of 70,000 plain letters.

use std::time::Duration;

use crate::support::listing::listing_server;
use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(60);

/// The owner's length: above the widest a format width may be.
const OWNER_LEN: usize = 70_000;

#[test]
fn a_listing_cell_wider_than_a_format_width_does_not_crash_the_command() {
    let node = listing_server("o".repeat(OWNER_LEN), "src".to_owned());
    let dir = Scratch::new("listing-cell-wider-than-a-format-width");
    let admin = dir.admin();
    for args in [
        vec!["locks", "--nodes", node.as_str()],
        vec!["locks", "--per-node", "--nodes", node.as_str()],
    ] {
        let mut all = args.clone();
        all.extend(["--admin-token-file", admin.as_str()]);
        let shown = cli(&dir, &all, &[], LIMIT);
        assert!(
            shown.code == Some(0) && !shown.stderr.contains("panicked"),
            "{args:?}: exit {:?}; stderr: {}",
            shown.code,
            shown.stderr.chars().take(600).collect::<String>()
        );
        assert!(
            shown.stdout.contains("reports"),
            "{args:?}: the lock is not listed: {}",
            shown.stderr.chars().take(600).collect::<String>()
        );
    }
}
