//! `--nodes` as groups of nodes: `east=a1:7070,a2:7070;west=b1:7070,...`.
//! Each group is a cluster of its own (a quorum of its own nodes), and a
//! lock name lives in one group, chosen as the library's `Groups` chooses
//! it ([`quorum_lock::Groups::place`]).
//!
//! The rules, stated once here and in `--help`:
//! - `;` separates groups, always: a `;` inside a URL (a password, a query)
//!   must be written `%3B`. Telling a separator from a `;` in a password
//!   by looking would guess, and a wrong guess splits a cluster.
//! - A group starts with an id and `=`. The text before the group's
//!   first `=` is an id when it holds no `:`, `/` or `@`: every node entry
//!   holds a `:` (`host:port`, `scheme://`) before any `=` of its own (a
//!   URL's query), so an entry is never taken for an id.
//! - With several groups, every group must carry its id: a position would
//!   give the same cluster another id in a list written in another order,
//!   and a name would then live in another cluster for each client.
//! - A list carrying credentials where a `;` directly follows a password
//!   in a URL's query (`password=`, `sslpassword=`: a name holding `pass`
//!   or `pwd`, as the library reads passwords) or falls inside a URL's
//!   user information is refused whole, showing nothing of it: the `;` is
//!   likely a password's, and its pieces would become nodes or ids.
//! - A list without `;` is one group and is checked exactly as before, so
//!   one cluster behaves as it always did (its id, if any, or `1`).

use thiserror::Error;

use crate::node_urls::{classify, classify_with, server_key, shown, Entry, EntryError, HIDDEN};

/// One group of `--nodes`: its id and its own list, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// Given before `=` (`1` for a list of one group without one).
    pub id: String,
    /// The group's nodes as given, without the id (credentials included:
    /// never show it).
    pub nodes: String,
    /// The nodes, each with its kind.
    pub entries: Vec<Entry>,
}

/// What `;` and `=` in a message about groups mean, and how to write them
/// inside a URL.
pub const GROUP_RULE: &str = "';' separates groups of nodes (ID=A,B,C;ID=D,E,F) and a URL must \
     write a ';' of its own as %3B";

/// The characters a group id may hold: it is printed in listings and
/// used as a column, so nothing that needs quoting.
fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The longest id (the library takes up to 256 bytes; a listing column
/// should stay readable).
const MAX_ID: usize = 64;

/// Why `--nodes` was refused as groups. Nothing here quotes a node as
/// given: entries are named as [`classify`] names them.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GroupError {
    /// One group alone: as before groups, word for word.
    #[error(transparent)]
    Single(EntryError),
    #[error(
        "group {position} of {total} of --nodes is empty: give each group its nodes, or remove \
         the extra ';' ({GROUP_RULE})"
    )]
    EmptyGroup { position: usize, total: usize },
    #[error(
        "group {position} of {total} of --nodes has an empty id before '=': write ID=A,B,C with \
         an id of letters, digits, '-', '_' or '.'"
    )]
    EmptyId { position: usize, total: usize },
    #[error(
        "group {position} of {total} of --nodes has no id: with several groups, start each \
         with its id and '=' (east=A,B,C;west=D,E,F), the same ids for every client, so that \
         each name lives in the same group whatever order the groups are listed in"
    )]
    NoId { position: usize, total: usize },
    #[error(
        "--nodes is refused as groups: a ';' follows a password in a URL (a query parameter \
         such as password= or sslpassword=, or the user information before '@'), so it may be \
         part of the password and its pieces would be taken for nodes or group ids (nothing of \
         the list is shown); write a ';' in a password as %3B (and a ',' as %2C)"
    )]
    CutSecret,
    #[error(
        "group {position} of {total} of --nodes has an id that is not usable: an id (the text \
         before '=') takes 1 to {MAX_ID} letters, digits, '-', '_' or '.'"
    )]
    BadId { position: usize, total: usize },
    /// Groups are named as [`named`] names them.
    #[error("the group id {id} is given twice in --nodes: give each group an id of its own")]
    IdTwice { id: String },
    #[error("group {id} of --nodes: {source}; {GROUP_RULE}")]
    Entry { id: String, source: EntryError },
    #[error(
        "node {node} is in both groups {first} and {second} of --nodes: each node serves one \
         group, or it would count towards two clusters"
    )]
    SharedNode {
        node: String,
        first: String,
        second: String,
    },
}

impl From<GroupError> for crate::fail::Failure {
    fn from(err: GroupError) -> crate::fail::Failure {
        crate::fail::Failure::usage(err.to_string())
    }
}

/// Each group's id and its nodes' text, as [`split_groups`] cuts
/// `--nodes`: ids, empty groups and a `;` that may be a password's are
/// checked, the nodes are not. One group when there is no `;` (its id,
/// if it has one, taken off). For `certs --nodes`, which takes the
/// client commands' lists but makes certificates for hosts.
pub fn group_texts(raw: &str) -> Result<Vec<(Option<&str>, &str)>, GroupError> {
    let parts: Vec<&str> = raw.split(';').collect();
    let total = parts.len();
    if total == 1 {
        return Ok(vec![id_and_nodes(raw, 1, 1)?]);
    }
    // Before anything reads the pieces: one of them may be a password's.
    if cuts_a_secret(raw) {
        return Err(GroupError::CutSecret);
    }
    let mut split = Vec::with_capacity(total);
    for (i, part) in parts.iter().enumerate() {
        let position = i + 1;
        if part.trim().is_empty() {
            return Err(GroupError::EmptyGroup { position, total });
        }
        let (id, nodes) = id_and_nodes(part, position, total)?;
        if nodes.trim().is_empty() {
            return Err(GroupError::EmptyGroup { position, total });
        }
        let id = id.ok_or(GroupError::NoId { position, total })?;
        split.push((Some(id), nodes));
    }
    Ok(split)
}

/// Splits `--nodes` into its groups and checks each (see the module's
/// rules); one group when there is no `;`.
pub fn split_groups(raw: &str) -> Result<Vec<NodeGroup>, GroupError> {
    let texts = group_texts(raw)?;
    if let [(id, nodes)] = texts.as_slice() {
        let entries = classify(nodes).map_err(GroupError::Single)?;
        return Ok(vec![NodeGroup {
            id: id.unwrap_or("1").to_owned(),
            nodes: (*nodes).to_owned(),
            entries,
        }]);
    }
    let total = texts.len();
    let split: Vec<(String, &str)> = texts
        .into_iter()
        .map(|(id, nodes)| (id.unwrap_or_default().to_owned(), nodes))
        .collect();
    // As `classify` tells a list that carries credentials, ids aside. In
    // such a list a `;` may have cut a password, whose pieces may look
    // like entries or ids: nothing of it is quoted, groups are named by
    // their place.
    let secret_bearing = split.iter().any(|(_, nodes)| nodes.contains(['@', '=']));
    let named = |at: usize, id: &str| {
        if secret_bearing {
            format!("{} of {total}", at + 1)
        } else {
            format!("'{id}'")
        }
    };
    let mut groups: Vec<NodeGroup> = Vec::with_capacity(total);
    for (at, (id, nodes)) in split.into_iter().enumerate() {
        if groups.iter().any(|g| g.id == id) {
            return Err(GroupError::IdTwice { id: named(at, &id) });
        }
        let entries = classify_with(nodes, secret_bearing).map_err(|source| GroupError::Entry {
            id: named(at, &id),
            source,
        })?;
        for entry in &entries {
            if let Some(first_at) = groups.iter().position(|g| shares(g, entry)) {
                let node = if secret_bearing {
                    format!("({HIDDEN})")
                } else {
                    crate::words::escaped(&shown(entry.given())).into_owned()
                };
                return Err(GroupError::SharedNode {
                    node,
                    first: named(first_at, &groups[first_at].id),
                    second: named(at, &id),
                });
            }
        }
        groups.push(NodeGroup {
            id,
            nodes: nodes.trim().to_owned(),
            entries,
        });
    }
    Ok(groups)
}

/// Whether a `;` of `raw` may be part of a password: it directly follows
/// the value of a URL's query parameter whose name holds `pass` or `pwd`
/// (as the library reads a URL's passwords: `password`, `sslpassword`),
/// or it falls inside a URL's user information (the URL's authority has
/// no `@`, `/`, `?` or `#` yet, and an `@` follows before any of `/`, `?`
/// or `#`). Narrow on purpose: `?sslmode=require;east=...` is a separator.
fn cuts_a_secret(raw: &str) -> bool {
    raw.match_indices(';').any(|(at, _)| {
        let (before, after) = (&raw[..at], &raw[at + 1..]);
        // The group the `;` ends, from its last URL on: a `,` may be a
        // password's too.
        let group = before.rsplit(';').next().unwrap_or(before);
        let Some((_, rest)) = group.rsplit_once("://") else {
            return false;
        };
        if let Some((_, query)) = rest.split_once('?') {
            let last = query.rsplit('&').next().unwrap_or(query);
            return last.split_once('=').is_some_and(|(key, _)| {
                let key = key.to_ascii_lowercase();
                key.contains("pass") || key.contains("pwd")
            });
        }
        let in_authority = !rest.contains(['@', '/', '#']);
        let user_info_follows = after
            .split(['/', '?', '#'])
            .next()
            .is_some_and(|head| head.contains('@'));
        in_authority && user_info_follows
    })
}

/// Whether `group` already lists `entry`'s node: a lock server by its
/// address (every spelling of one), a URL as given.
fn shares(group: &NodeGroup, entry: &Entry) -> bool {
    group.entries.iter().any(|e| match (e, entry) {
        (Entry::Server(a), Entry::Server(b)) => server_key(a) == server_key(b),
        (a, b) => a.given() == b.given(),
    })
}

/// A group's id, when it starts with one, and its nodes.
fn id_and_nodes(
    group: &str,
    position: usize,
    total: usize,
) -> Result<(Option<&str>, &str), GroupError> {
    let Some((before, after)) = group.split_once('=') else {
        return Ok((None, group));
    };
    // An entry holds `:` (host:port, scheme://) or `@` before its own `=`.
    if before.contains([':', '/', '@']) {
        return Ok((None, group));
    }
    let id = before.trim();
    if id.is_empty() {
        return Err(GroupError::EmptyId { position, total });
    }
    if id.len() > MAX_ID || !id.chars().all(id_char) {
        return Err(GroupError::BadId { position, total });
    }
    Ok((Some(id), after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(raw: &str) -> Vec<String> {
        split_groups(raw)
            .expect(raw)
            .into_iter()
            .map(|g| g.id)
            .collect()
    }

    #[test]
    fn groups_take_their_ids_and_several_groups_need_them() {
        assert_eq!(ids("east=a:1,b:1;west=c:1,d:1"), ["east", "west"]);
        assert_eq!(ids(" x.y_z-1 = a:1 ; w=c:1 "), ["x.y_z-1", "w"]);
        let groups = split_groups("east=a:1,b:1;w=c:1").expect("two groups");
        assert_eq!(groups[0].nodes, "a:1,b:1");
        assert_eq!(groups[0].entries.len(), 2);
        assert_eq!(groups[1].nodes, "c:1");
        // By position, one cluster would take another id in a list
        // written in another order: refused, saying what to write.
        for (raw, position) in [("a:1;b:1;c:1", 1), ("east=a:1;c:1", 2), ("a:1;w=c:1", 1)] {
            let err = split_groups(raw).expect_err(raw);
            assert_eq!(
                err,
                GroupError::NoId {
                    position,
                    total: raw.split(';').count()
                }
            );
            let text = err.to_string();
            assert!(text.contains("east=A,B,C;west=D,E,F"), "{text}");
            assert_eq!(crate::fail::Failure::from(err).code, crate::fail::USAGE);
        }
    }

    #[test]
    fn one_list_without_a_semicolon_is_one_group_checked_as_before() {
        let groups = split_groups("a:1,b:1,c:1").expect("one group");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].id, "1");
        assert_eq!(groups[0].nodes, "a:1,b:1,c:1");
        assert_eq!(ids("east=a:1"), ["east"]);
        // Errors of one list are word for word those of `classify`.
        for bad in [
            "",
            "a:1,a:1",
            "a:1,,b:1",
            "http://x:1",
            "host=db user=u password=Pw",
        ] {
            let old = classify(bad).expect_err(bad).to_string();
            let new = split_groups(bad).expect_err(bad).to_string();
            if !bad.starts_with("host=") {
                assert_eq!(new, old, "{bad}");
            }
            assert!(!new.contains("Pw"), "{new}");
        }
    }

    #[test]
    fn a_url_with_equals_signs_in_its_query_is_not_taken_for_an_id() {
        let raw = "e=postgres://u:pw@db1/x?sslmode=require&application_name=a,10.0.0.1:7070;\
                   w=redis://:pw@r:6379/0?x=1";
        let groups = split_groups(raw).expect("two groups");
        assert_eq!(ids(raw), ["e", "w"]);
        assert_eq!(groups[0].entries.len(), 2);
        assert_eq!(
            groups[1].entries,
            [Entry::Redis("redis://:pw@r:6379/0?x=1".into())]
        );
        assert_eq!(ids("west=mysql://u:p%3Bw@db/x?a=b"), ["west"]);
        // Without an id, the URL is still no id: the group has none.
        let bare = "postgres://u:pw@db1/x?sslmode=require;w=a:1";
        assert_eq!(
            split_groups(bare),
            Err(GroupError::NoId {
                position: 1,
                total: 2
            })
        );
    }

    #[test]
    fn a_semicolon_in_a_url_must_be_percent_encoded() {
        let encoded = split_groups("postgres://u:Pw%3BSecret9@db/x").expect("one group");
        assert_eq!(encoded.len(), 1);
        // Unencoded, it splits the URL; the error says the rule and shows
        // no piece of the password.
        let text = split_groups("postgres://u:Pw;Secret9@db/x")
            .expect_err("split")
            .to_string();
        assert!(text.contains("%3B"), "{text}");
        assert!(!text.contains("Secret9") && !text.contains("Pw"), "{text}");
    }

    #[test]
    fn bad_groups_are_refused_saying_what_to_write() {
        for (raw, expected) in [
            ("e=a:1;", "group 2 of 2 of --nodes is empty"),
            (";e=a:1", "group 1 of 2 of --nodes is empty"),
            ("e=a:1; ;w=b:1", "group 2 of 3 of --nodes is empty"),
            ("east=;w=b:1", "group 1 of 2 of --nodes is empty"),
            ("=a:1;w=b:1", "group 1 of 2 of --nodes has an empty id"),
            (
                "e st=a:1;w=b:1",
                "group 1 of 2 of --nodes has an id that is not usable",
            ),
            ("a:1;w=b:1", "group 1 of 2 of --nodes has no id"),
            ("east=a:1;east=b:1", "the group id 'east' is given twice"),
            ("e=a:1;w=b:1,a:1", "node a:1 is in both groups 'e' and 'w'"),
            (
                "e=a:1;w=b:1,127.0.0.1:2;c=127.1:2",
                "node 127.1:2 is in both groups 'w' and 'c'",
            ),
            (
                "w=a:1;east=b",
                "group 'east' of --nodes: bad node address 'b'",
            ),
            (
                "east=a:1;west=b=a:1",
                // `=` may be a password's: named by place only.
                "group 2 of 2 of --nodes: bad node address 1 of 1 (not shown",
            ),
        ] {
            let err = split_groups(raw).expect_err(raw);
            let text = err.to_string();
            assert!(text.starts_with(expected), "{raw}: {text}");
            assert_eq!(crate::fail::Failure::from(err).code, crate::fail::USAGE);
        }
        let long = format!("{}=a:1;w=b:1", "x".repeat(MAX_ID + 1));
        assert!(matches!(split_groups(&long), Err(GroupError::BadId { .. })));
    }

    #[test]
    fn a_node_in_two_groups_is_not_shown_when_the_list_carries_credentials() {
        let text = split_groups("e=redis://:Secret5@r:1;w=redis://:Secret5@r:1")
            .expect_err("shared")
            .to_string();
        assert!(text.contains("in both groups 1 of 2 and 2 of 2"), "{text}");
        assert!(!text.contains("Secret5"), "{text}");
    }

    /// A `;` in a password, not written %3B, cuts its URL in two: the
    /// piece after it may look like an entry, or like an id before '='.
    #[test]
    fn no_piece_of_a_password_cut_by_a_semicolon_shows() {
        for raw in [
            "redis://127.0.0.1:1/locks?user=app&password=Head1;Tail1",
            "postgres://h/x?password=Head1;Tail1=x",
            "postgres://h/x?password=Head1;Tail1=x;Tail1=y",
            "mysql://app:Head1;Tail1@h/x",
            "redis://:Head1;Tail1,Tail1@h:1",
            "e=postgres://h/x?sslpassword=Head1;w=Tail1:1",
            "e=mysql://app:Head1;Tail1;Tail1@h/x",
            "e=redis://h:1?user=a&PassWord=Head1;Tail1=h:2",
        ] {
            let text = split_groups(raw).expect_err(raw).to_string();
            assert!(!text.contains("Tail1"), "{raw}: {text}");
            assert!(!text.contains("Head1"), "{raw}: {text}");
            assert!(text.contains("%3B"), "{raw}: {text}");
        }
    }

    /// Narrow: a `;` after a query parameter that is no password, or after
    /// a URL's host, separates groups.
    #[test]
    fn a_semicolon_after_no_password_separates_groups() {
        for raw in [
            "e=postgres://u:pw@h/x?sslmode=require;west=a:1",
            "e=redis://:pw@h:1;w=redis://u:pw@i:1",
            "e=mysql://u:pw@h/x?password=p&ssl-mode=REQUIRED;w=b:1",
            "e=redis://h:1;w=redis://:pw@i:1/0",
        ] {
            assert_eq!(split_groups(raw).expect(raw).len(), 2, "{raw}");
        }
    }
}
