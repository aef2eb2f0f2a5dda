//! Determinism across processes: the same cases of every family, run by two separate processes
//! of the harness binary, give identical trace hashes (no per-process state such as hash seeds,
//! addresses or thread ids leaks into a trace).

use std::process::Command;

fn hashes() -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["hashes", "--cases", "6", "--seed", "0xC0FFEE"])
        .output()
        .expect("the harness binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn two_processes_give_identical_trace_hashes_for_every_family() {
    let first = hashes();
    let second = hashes();
    let lines: Vec<&str> = first.lines().collect();
    for family in harness::families::FAMILIES {
        let prefix = format!("v1.{}.", family.name);
        assert_eq!(lines.iter().filter(|l| l.starts_with(&prefix)).count(), 6, "{first}");
    }
    assert_eq!(first, second, "the two processes disagree");
}
