//! Reproduces a past break: a reopen whose socket could not get its second handle (the process at its file descriptor limit) was taken for an attempt the locker had given up itself, so the locker read online for ever with no connect error.
//!
//! A socket in its handshake is listed with a second handle (a `dup`) so
//! that the locker can shut it down; when that `dup` fails, the socket is
//! not listed, and the attempt read as one the locker gave up (dropped,
//! or another connection in). After an idle close the next call's reopen
//! then failed without a word: no connect error, no backoff step, and
//! `is_online()` stayed true, though the docs promise that a reopen that
//! fails leaves the locker offline with `connect_error()` saying why.
//!
//! The descriptor limit is the process's, so the scenario runs in a child
//! process (this test binary, this test alone) on a current-thread
//! runtime: the limit is lowered until exactly one descriptor is free, so
//! the socket gets it and its `dup` fails.
#![cfg(feature = "net")]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use quorum_lock::NetLocker;

use crate::stand_in::{self, args};

const CHILD: &str = "QUORUM_LOCK_TEST_DESCRIPTOR_LIMIT_CHILD";

#[test]
fn a_reopen_without_a_free_descriptor_leaves_the_locker_offline_saying_why() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    // This test's name as the harness knows it: the module path without
    // the crate.
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_, module)| module);
    let name = format!(
        "{module}::a_reopen_without_a_free_descriptor_leaves_the_locker_offline_saying_why"
    );
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(exe)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child process");
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // At most 60 s; then the child (ours, by its id) is killed.
    let mut status = None;
    for _ in 0..600 {
        if let Some(done) = child.try_wait().expect("wait") {
            status = Some(done);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    let ran = out.contains("1 passed") || out.contains("1 failed");
    assert!(ran, "the child ran no test (pid {pid}):\n{out}\n{err}");
    assert!(
        status.is_some_and(|s| s.success()),
        "the child failed (pid {pid}):\n{out}\n{err}"
    );
}

fn child() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (listener, addr) = stand_in::bind().await;
        let server = tokio::spawn(async move {
            let first = stand_in::accept_hello(&listener).await.expect("hello");
            stand_in::welcome_then_close_as_idle(first).await;
            stand_in::welcome_and_grant_every_connection(listener).await;
        });
        let locker = stand_in::connected_until_the_idle_close(addr).await;
        assert!(locker.is_online(), "online after the idle close");

        // Exactly one descriptor free from here: the lowest free one.
        let lowest = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(lowest >= 0, "a descriptor for /dev/null");
        unsafe { libc::close(lowest) };
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
        let low = libc::rlimit {
            rlim_cur: lowest as libc::rlim_t + 1,
            rlim_max: old.rlim_max,
        };
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);

        // The next call reopens; its socket gets the one descriptor, and
        // the second handle fails.
        let call = tokio::time::timeout(Duration::from_secs(5), locker.lock(&args("uid-a"))).await;
        let online = locker.is_online();
        let why = locker.connect_error();

        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) }, 0);
        drop(locker);
        server.abort();

        let call = call.expect("the call ended within 5 s");
        assert!(call.is_err(), "no connection could be made: {call:?}");
        assert!(
            !online && why.is_some(),
            "the reopen failed (the call said: {call:?}), yet the locker reads online \
             ({online}) with connect error {why:?}"
        );
    });
}
