//! Fault injection and history checking for tests (feature `testing`).
