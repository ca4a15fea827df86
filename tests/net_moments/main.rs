//! Client tests that pin a moment inside the library by holding the
//! thread that logs a given line (`hold_at_log_line`). tracing decides
//! once per log statement, for the whole process, whether anyone wants
//! it; in a process of their own, no other test's subscriber changes that
//! under them.
#![cfg(feature = "net")]

#[path = "../net_support/wire.rs"]
mod wire;

#[path = "../net_support/stand_in.rs"]
mod stand_in;

mod hold_at_log_line;

mod a_call_made_while_an_idle_close_is_judged_gets_through;
mod a_call_waiting_for_a_reopen_whose_runtime_shut_down_gets_through;
