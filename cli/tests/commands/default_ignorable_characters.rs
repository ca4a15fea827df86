//! Listings must not let two different locks read alike. Besides the
//! format characters (Cf) they already escape, Unicode has invisible
//! "default ignorable" characters of other categories that terminals draw
//! as nothing: variation selectors (U+FE00 to U+FE0F, U+E0100 to U+E01EF),
//! the combining grapheme joiner (U+034F), the Mongolian free variation
//! selectors (U+180B to U+180D) and the Hangul fillers (U+115F, U+3164).
//! The lockers accept them in names and owners, so a lock named
//! `backup` + U+FE0F shows as a second `backup` row unless they are
//! escaped like the format characters (docs/cli.md: "an invisible
//! formatting character is written as an escape").

use std::time::Duration;

use crate::support::{cli, wait_until, Cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Characters drawn as nothing that are not of category Cf.
const IGNORABLE: [char; 5] = ['\u{fe0f}', '\u{34f}', '\u{e0100}', '\u{180b}', '\u{3164}'];

#[test]
fn listings_escape_invisible_variation_selectors_and_joiners_in_names_and_owners() {
    let dir = Scratch::new("default-ignorable-characters");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let token = dir.token();
    let admin = dir.admin();
    // Looks like "backup" held by "ops", but is another lock.
    let name: String = std::iter::once("backup".to_owned())
        .chain(IGNORABLE.iter().map(|c| c.to_string()))
        .collect();
    let owner = format!("ops{}", IGNORABLE[0]);
    let holder = Cli::spawn(
        &dir,
        &[
            "lock",
            "--nodes",
            &node,
            "--token-file",
            &token,
            "--owner",
            &owner,
            &name,
        ],
        &[],
    );
    wait_until(LIMIT, "the lock is granted", || {
        holder.stdout_so_far().contains("uid=")
    });

    for view in [&["locks"][..], &["locks", "--per-node"], &["status"]] {
        let mut args = view.to_vec();
        args.extend(["--nodes", &node, "--admin-token-file", &admin]);
        let shown = cli(&dir, &args, &[], LIMIT);
        assert_eq!(shown.code, Some(0), "{view:?}: {shown:?}");
        assert!(
            shown.stdout.contains("backup"),
            "{view:?}: the lock is not listed: {:?}",
            shown.stdout
        );
        for c in IGNORABLE {
            assert!(
                !shown.stdout.contains(c),
                "{view:?}: stdout holds the invisible U+{:X} raw, so the lock reads as \
                 another: {:?}",
                u32::from(c),
                shown.stdout
            );
        }
    }
    drop(holder);
}
