//! The network transport in one process (feature `net`): the wire format
//! against malformed and hostile input (also decoder properties over
//! every frame type, with a global allocator that counts), the server's limits, races between
//! connections, reconnects, connecting to a cluster, TLS (per-node names,
//! mutual TLS), the validity a server announces, and leader election over
//! lock servers.

#[cfg(feature = "net")]
#[path = "../net_support/wire.rs"]
mod wire;

#[cfg(feature = "net")]
#[path = "../net_support/stand_in.rs"]
mod stand_in;

#[path = "../log_capture/mod.rs"]
mod log_capture;

mod a_backed_off_reopen_is_made_once_per_step;
mod a_call_making_an_overdue_attempt_supersedes_the_parked_reconnect;
mod a_connect_timeout_without_limit_does_not_panic;
mod a_connection_closed_before_it_served_a_call_is_not_reopened_in_the_background;
mod a_connection_given_up_on_an_idle_runtime_is_closed;
mod a_dropped_locker_closes_its_connection_while_a_reconnect_is_parked;
mod a_dropped_locker_closes_its_connection_while_a_reopen_is_parked;
mod a_dropped_locker_closes_the_socket_of_a_reopen_parked_mid_handshake;
mod a_dropped_reopen_does_not_keep_a_dead_server_online;
mod a_lapsed_watch_does_not_make_an_idle_close_reconnect_at_once;
mod a_late_reopen_does_not_close_a_connection_in_use;
mod a_later_idle_close_does_not_keep_a_dead_server_online_behind_a_parked_reopen;
mod a_locker_stays_online_while_its_reopen_is_under_way;
mod a_parked_reopen_failing_after_a_dropped_one_leaves_the_locker_offline;
mod a_parked_reopen_failing_behind_another_parked_one_leaves_the_locker_offline;
mod a_reconnect_parked_on_an_idle_runtime_is_taken_over;
mod a_reopen_failing_late_does_not_park_the_reconnect;
mod a_reopen_parked_in_its_tcp_connect_has_its_socket_shut_down;
mod a_runtime_shut_down_under_a_watch_leaves_the_locker_online;
mod a_server_that_breaks_each_connection_is_reconnected_to_with_a_growing_backoff;
mod a_server_that_never_answers_a_reopen_goes_offline_when_callers_give_up;
mod admin_during_a_flood_of_silent_connections;
mod an_idle_close_after_a_caller_gave_up_on_its_reopen_waits_for_the_next_call;
mod calls_after_a_runtime_shut_down_under_a_late_connection_get_through;
mod calls_do_not_wait_for_a_reopen_parked_on_an_idle_runtime;
mod calls_each_on_a_runtime_of_their_own_get_through_with_the_server_up;
mod calls_from_a_current_thread_runtime_get_through_after_an_idle_close;
mod calls_from_a_current_thread_runtime_get_through_once_the_server_is_up;
mod calls_that_give_up_before_the_call_timeout_get_off_a_connection_on_an_idle_runtime;
mod calls_that_give_up_from_a_current_thread_runtime_get_through_to_a_slow_server;
mod calls_to_a_server_rejecting_the_token_do_not_each_open_a_connection;
mod calls_waiting_for_a_dropped_reopen_still_connect;
mod ceiling;
mod concurrent_calls_after_an_idle_close;
mod connect;
mod connection_slots;
mod decoder_properties;
mod door_refusal_log_wording;
mod election;
mod expiry;
mod foreign;
mod fuzz;
mod hostile_pushes_reach_logs_escaped;
mod hostile_server_endless_listing_pages;
mod hostile_server_error_replies_in_client_logs;
mod hostile_server_reconnect_cycle_in_client_logs;
mod late_validity;
mod limits;
mod listing_a_table_of_entries_at_the_text_limits;
mod listing_after_an_idle_close_comes_in_pages;
mod listing_replies_decode_within_the_frame_limit;
mod listings_and_health_answered_with_a_bool_are_errors;
#[cfg(feature = "net")]
mod node;
mod owner_over_the_protocol_limit_refused_when_built;
mod places_end_with_releases_of_any_mode;
mod places_in_line_per_connection;
mod places_of_a_waiter_granted_a_plain_lock;
mod places_of_a_waiter_whose_old_connection_refreshed;
mod places_of_reconnected_waiters;
mod races;
mod reconnect;
mod reconnect_after_restart_following_idle_closes;
mod refusal_logs;
mod semaphore;
mod tls;
mod tls_handshake_timeout_bounds_authentication;
mod transport;
