//! The `quorum-lock` command line end to end: lock-server processes on
//! loopback ports, and the `run` (`--permits` too), `elect`, `locks`,
//! `force-unlock` and `status` commands against them, with their output and
//! exit codes; the same commands against Redis nodes (skipped, saying why,
//! without `redis-server`, unless `QUORUM_LOCK_REQUIRE_REDIS` is set), and
//! against PostgreSQL and MariaDB beside a lock server (skipped likewise
//! without them, unless `QUORUM_LOCK_REQUIRE_SQL` is set).

#[path = "../../../tests/common/ports.rs"]
mod ports;
#[path = "../../../tests/redis_support/mod.rs"]
mod redis_support;
#[path = "../../../tests/sql_support/mod.rs"]
mod sql_support;
mod support;

mod a_database_password_from_the_environment_is_kept_from_the_command;
mod a_handshake_stalled_after_its_length_is_not_logged_as_one_that_sent_nothing;
mod a_listing_cell_wider_than_a_format_width_does_not_crash_the_command;
mod a_listing_quoting_the_admin_token_does_not_show_it;
mod a_long_listing_field_is_cut_not_masked_whole;
mod a_malformed_password_file_line_is_not_logged_with_its_password;
mod a_node_behind_a_second_id_is_refused_in_two_groups;
mod a_password_piece_cut_by_a_semicolon_is_not_shown_as_a_group_id;
mod a_password_piece_cut_by_a_semicolon_is_not_shown_as_a_node;
mod a_peer_without_a_token_learns_nothing_of_the_tokens_from_its_refusal;
mod a_postgres_client_key_from_the_environment_is_kept_from_the_command;
mod a_redis_node_or_database_in_two_groups_is_refused_however_spelled;
mod admin;
mod admin_during_a_silent_flood;
mod admin_reserve_beyond_open_files;
mod admin_reserve_edge_values;
mod admin_reserve_of_one_under_a_silent_flood;
mod admin_reserve_under_flood;
mod an_elections_lock_is_forced_open_in_the_group_locks_lists_it_in;
mod auth;
mod background;
mod budget;
mod causes;
mod certs_and_listen_errors_show_no_password;
mod certs_takes_the_groups_of_the_client_commands_nodes;
mod cluster;
mod debug_logs;
mod disconnects;
mod door_wait_of_a_connection_that_spoke;
mod duration_errors_show_no_password;
mod edges;
mod elect;
mod errors;
mod file_flag_errors_show_no_password;
mod flood_log_wording;
mod force_unlock_status_lines_escaped;
mod group_gone_before_the_next_holder;
mod groups_listed_in_another_order_place_a_name_alike;
mod inherited;
mod invisible_characters;
mod listing_a_large_lock_table;
mod malformed;
mod metrics;
mod metrics_address_error_shows_no_password;
mod metrics_endpoint_flood;
mod misplaced_urls;
mod names;
mod node_groups;
mod node_urls_given_as_lock_names;
mod open_files_below_the_spare_descriptors;
mod outcomes;
mod peer_text;
mod permits;
mod push;
mod redis_cli;
mod redis_password_read_as_a_port;
mod refusal_log_lines;
mod run;
mod run_fencing;
mod secrets;
mod servers_listed_twice;
mod slow_handshake_log_wording;
mod source;
mod sql_cli;
mod sql_duplicates;
mod status;
mod status_after_a_connection_closed_in_the_handshake;
mod status_watch_lists_a_large_table_after_idle_closes;
mod tls;
mod unauthenticated_memory;
mod versions;
mod waiting;
