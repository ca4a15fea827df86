//! Which group a name lives in: rendezvous (highest random weight)
//! hashing over the groups' ids.
//!
//! Invariants: the score of a name in a group depends on the name and the
//! group's id alone, so adding or removing a group moves only the names
//! that go to or come from it; the hash is fixed (FNV-1a, then a 64-bit
//! finalizer) and must never change, or processes of two versions would
//! place one name in two groups.

/// FNV-1a's 64-bit offset basis and prime.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The score of `name` in the group `id`: FNV-1a over the id, a 0xff byte
/// (which no UTF-8 text holds, so no id and name run together as
/// another), and the name, mixed by MurmurHash3's 64-bit finalizer so
/// that every bit of the input moves every bit of the score.
pub(crate) fn score(id: &str, name: &str) -> u64 {
    let mut hash = FNV_OFFSET;
    let bytes = id.bytes().chain([0xff]).chain(name.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    finalize(hash)
}

fn finalize(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The position in `ids` of the group `name` lives in: the highest score,
/// a tie going to the smaller id. `ids` is not empty.
pub(crate) fn winner<'a>(ids: impl IntoIterator<Item = (usize, &'a str)>, name: &str) -> usize {
    let mut best: Option<(u64, &str, usize)> = None;
    for (at, id) in ids {
        let s = score(id, name);
        let better = match best {
            None => true,
            Some((bs, bid, _)) => s > bs || (s == bs && id < bid),
        };
        if better {
            best = Some((s, id, at));
        }
    }
    best.map_or(0, |(_, _, at)| at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_fixed_forever() {
        // Changing these moves names between groups: processes of two
        // versions would then lock one name in two groups.
        assert_eq!(score("a", "x"), score("a", "x"));
        let pinned = [
            score("a", "x"),
            score("b", "x"),
            score("", ""),
            score("group-1", "invoices/2026-11"),
        ];
        assert_eq!(
            pinned,
            [
                0xdc13_de6a_d6a2_e173,
                0x15df_b050_4b28_47eb,
                0x1bbd_5c81_3c69_a8d7,
                0x6dcb_3b5d_2ac9_eace,
            ],
            "{pinned:x?}"
        );
    }

    #[test]
    fn an_id_and_a_name_do_not_run_together() {
        assert_ne!(score("ab", "c"), score("a", "bc"));
    }
}
