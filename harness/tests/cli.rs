//! The CLI as a shell user meets it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// `harness hashes | head -1`: once the reader has gone, the next line the harness prints ends it
/// quietly with the SIGPIPE status (141), not with a panic and a backtrace on stderr.
#[test]
fn a_closed_stdout_ends_the_process_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["hashes", "--family", "relay", "--cases", "40", "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the harness binary runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut first).expect("one line");
    assert!(first.starts_with("v1.relay."), "{first}");
    // The reader (and with it the pipe's only read end) is dropped here.
    let output = child.wait_with_output().expect("the harness ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}
