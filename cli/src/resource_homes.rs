//! Which group of `--nodes` an election's or a semaphore's resource lives
//! in. `Groups` places an election `N` (resource `election/N`) and a
//! semaphore `N` (resources `semaphore/N/...`) in the group of `N`, not of
//! the resource's text; `force-unlock` is given the text `locks` shows,
//! which does not tell `N` for certain: `N` may hold `/`, and a plain lock
//! may be called `election/x` too. So such a text is forced in every
//! group, and this module only orders the groups, the likely ones first.

use quorum_lock::{Groups, ELECTION_PREFIX, SEMAPHORE_PREFIX};

/// The names whose group `resource` may live in, the likeliest first and
/// the text itself last; `None` for a resource of no election or
/// semaphore, which lives in its own text's group alone.
pub fn owners(resource: &str) -> Option<Vec<String>> {
    let mut owners: Vec<String> = Vec::new();
    if let Some(name) = resource.strip_prefix(ELECTION_PREFIX) {
        owners.push(name.to_owned());
    } else if let Some(rest) = resource.strip_prefix(SEMAPHORE_PREFIX) {
        // What a semaphore's names end in (src/semaphore/names.rs):
        // `/queue`, `/permit/I`, `/held/I/D/V`, `/count-bit/B/V`.
        let stems = [
            rest.strip_suffix("/queue"),
            stem_before(rest, "/permit/", 1),
            stem_before(rest, "/held/", 3),
            stem_before(rest, "/count-bit/", 2),
        ];
        owners.extend(stems.into_iter().flatten().map(str::to_owned));
        // Any other cut at a '/', from the longest name.
        let cuts = rest.match_indices('/').rev().map(|(at, _)| &rest[..at]);
        owners.extend(cuts.chain([rest]).map(str::to_owned));
    } else {
        return None;
    }
    owners.push(resource.to_owned());
    let mut unique: Vec<String> = Vec::with_capacity(owners.len());
    for owner in owners {
        if !owner.is_empty() && !unique.contains(&owner) {
            unique.push(owner);
        }
    }
    Some(unique)
}

/// `rest` before its last `marker` when `fields` fields of digits follow.
fn stem_before<'a>(rest: &'a str, marker: &str, fields: usize) -> Option<&'a str> {
    let (stem, tail) = rest.rsplit_once(marker)?;
    let parts: Vec<&str> = tail.split('/').collect();
    let digits = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    (parts.len() == fields && parts.iter().all(digits)).then_some(stem)
}

/// Every one of `ids`: first the groups `owners` are placed in, in the
/// owners' order, then the others in the order given.
pub fn likely_first(ids: &[&str], owners: &[String]) -> Vec<String> {
    let mut ordered: Vec<String> = Vec::with_capacity(ids.len());
    let placed = owners
        .iter()
        .filter_map(|owner| Groups::place(ids.iter().copied(), owner));
    for id in placed.chain(ids.iter().copied()) {
        if !ordered.iter().any(|o| o == id) {
            ordered.push(id.to_owned());
        }
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elections_or_semaphores_resource_names_its_owners_first() {
        assert_eq!(owners("jobs/a"), None);
        assert_eq!(owners("election/a/b").unwrap(), ["a/b", "election/a/b"]);
        let permit = owners("semaphore/pool/x/permit/12").unwrap();
        assert_eq!(permit[0], "pool/x");
        assert_eq!(permit.last().unwrap(), "semaphore/pool/x/permit/12");
        assert_eq!(owners("semaphore/s/held/2/1/0").unwrap()[0], "s");
        assert_eq!(owners("semaphore/s/count-bit/3/1").unwrap()[0], "s");
        assert_eq!(owners("semaphore/s/queue").unwrap()[0], "s");
    }

    #[test]
    fn every_group_is_ordered_the_owners_first() {
        let ids = ["east", "west", "north"];
        let name = (0..1_000)
            .map(|n| format!("leader-{n}"))
            .find(|n| Groups::place(ids, n) == Some("north"))
            .expect("a name placed in north");
        let ordered = likely_first(&ids, &owners(&format!("election/{name}")).unwrap());
        assert_eq!(ordered.len(), 3);
        assert_eq!(ordered[0], "north");
    }
}
