//! The shard's own tests: what it keeps after peaks and churn.

use super::*;

mod memory_tests;

/// A shard's map under churn of names, after inserts.
mod a_shards_map_of_names_stays_at_least_three_eighths_full_after_inserts;

/// A shard's map after a promotion drops the last places of its names.
mod a_shard_gives_back_its_maps_room_after_a_promotion_drops_its_names;
