//! The trace viewer end to end: the CLI's round trip (a replay's violations equal those of
//! `check` on its JSONL; bad input exits 2 with the line), and the page in a real browser:
//! Debian's headless `chromium` loads the page of a known violating token, the rendered DOM has
//! a lane per host, an arrow per correlated message and the violation marker, and a screenshot
//! is a non-blank PNG.
//!
//! Without chromium the browser test skips with a loud message, except in CI (`CI=true`), where
//! `.ci/run` installs it and its absence is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
#[allow(clippy::disallowed_methods)] // render time is wall time, measured for the report; nothing recorded
fn now() -> std::time::Instant {
    std::time::Instant::now()
}

use harness::hunt;
use harness::runner::run;
use harness::token::Token;
use harness::view::{self, Layout};

/// The token `hunt --family relay --bug no_closed_out_filter --seed 1` prints, found the same way
/// (a hard-coded token goes stale whenever the relay generator changes).
fn violating_token() -> String {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let bugs = ["no_closed_out_filter".to_string()];
            let mut config = hunt::HuntConfig::new(&harness::relay::RELAY, &bugs, 256, 1);
            config.shrink_budget = 0;
            let report = hunt::hunt(&config, &mut hunt::Quiet).expect("the hunt runs");
            let finding = report.findings.first().expect("no_closed_out_filter is found within 256 cases of seed 1");
            finding.token.to_string()
        })
        .clone()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn harness_cli(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_harness")).args(args).output().expect("the harness binary runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// The `--- violations` block of a replay or check output.
fn violations_block(output: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in output.lines() {
        if line.starts_with("--- violations") {
            inside = true;
        } else if inside && !line.starts_with("  ") {
            break;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn check_of_a_replays_jsonl_finds_the_same_violations() {
    let dir = scratch("round-trip");
    let jsonl = dir.join("t.jsonl");
    let html = dir.join("t.html");
    let (code, replay, err) = harness_cli(&[
        "replay",
        &violating_token(),
        "--no-shrink",
        "--jsonl",
        jsonl.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "replay of a violating token exits 1: {err}");
    let expected = violations_block(&replay);
    // The switch's symptom: a second reply for an answered id, or a reply to an id never sent.
    let symptom = ["[one_reply_per_id]", "[reply_answers_outstanding]"];
    assert!(symptom.iter().any(|s| expected.contains(s)), "{replay}");
    assert!(html.is_file() && jsonl.is_file());

    let (code, check, err) = harness_cli(&["check", jsonl.to_str().unwrap()]);
    assert_eq!(code, 1, "check of a violating trace exits 1: {check}{err}");
    assert_eq!(violations_block(&check), expected);
    let hash = |text: &str| text.lines().find(|l| l.starts_with("trace-hash: ")).map(str::to_string);
    assert_eq!(hash(&check), hash(&replay), "the JSONL is the same trace, byte for byte");

    // The same trace with the switch's second reply taken out is clean.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let clean_path = dir.join("clean.jsonl");
    let (code, _, _) = {
        let token = Token::parse("v1.relay.none.0000000000000001").unwrap();
        let outcome = run(&hunt::generate(&token).current());
        assert!(outcome.violations.is_empty());
        std::fs::write(&clean_path, harness::jsonl::write(&outcome.trace)).unwrap();
        harness_cli(&["check", clean_path.to_str().unwrap()])
    };
    assert_eq!(code, 0, "a clean trace checks clean");

    // Bad input: exit 2, the line number and what was wrong.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"at_ms\":\"soon\",\"host\":\"bridge\",\"kind\":\"x\",\"fields\":{}}";
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let (code, _, err) = harness_cli(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("line 3: not an event") && err.contains("at_ms"), "{err}");
    let (code, _, err) = harness_cli(&["check", dir.join("absent.jsonl").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no such file"), "{err}");
    // No run.spec: the family must be named.
    let no_spec = dir.join("no-spec.jsonl");
    std::fs::write(&no_spec, text.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n").unwrap();
    let (code, _, err) = harness_cli(&["check", no_spec.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--family"), "{err}");
    let (code, out, _) = harness_cli(&["check", no_spec.to_str().unwrap(), "--family", "relay"]);
    assert!(code == 0 || code == 1, "{out}");

    // view draws a trace from elsewhere.
    let viewed = dir.join("viewed.html");
    let (code, out, err) = harness_cli(&["view", jsonl.to_str().unwrap(), "--html", viewed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let page = std::fs::read_to_string(&viewed).unwrap();
    assert!(page.contains("class=\"violation-marker\""));
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Run headless chromium on a page with the flags that work in a container; `extra` chooses
/// what it does (`--dump-dom`, `--screenshot=...`). Returns stdout and the wall time.
fn chromium_run(browser: &Path, dir: &Path, page: &Path, fragment: &str, extra: &[String]) -> (String, std::time::Duration) {
    let profile = dir.join("profile");
    let _ = std::fs::remove_dir_all(&profile);
    let started = now();
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}{fragment}", page.display()))
        .output()
        .expect("chromium runs");
    let took = started.elapsed();
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8_lossy(&output.stdout).into_owned(), took)
}

/// A PNG's width and height from its IHDR chunk, after checking the signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 33 && bytes[..8] == *b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let word = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    (word(16), word(20))
}

#[test]
fn chromium_draws_the_violating_token() {
    let Some(browser) = chromium() else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("chromium is not installed, and CI must run the browser test (.ci/run installs it)");
        }
        eprintln!();
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        eprintln!("!!! SKIPPED: the browser test needs `chromium` (apt-get install -y chromium)");
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        return;
    };
    let dir = scratch("browser");
    let token_text = violating_token();
    let token = Token::parse(&token_text).unwrap();
    let scenario = hunt::generate(&token).current();
    let outcome = run(&scenario);
    assert!(outcome.failed(), "the token still finds its bug");
    let layout = Layout::new(&outcome.trace, &outcome.violations);
    let header = view::Header { title: token_text.clone(), summary: scenario.family.summary(), hash: outcome.trace.hash() };
    let page = dir.join("trace.html");
    std::fs::write(&page, view::page(&outcome.trace, &outcome.violations, &header)).unwrap();

    let dump = ["--dump-dom".to_string()];
    let (dom, took) = chromium_run(&browser, &dir, &page, "", &dump);
    assert!(dom.contains("data-ready=\"1\""), "the page's script ran to its end");
    for host in &layout.lanes {
        assert_eq!(dom.matches(&format!("class=\"lane\" data-host=\"{host}\"")).count(), 1, "one lane for {host}");
    }
    assert_eq!(dom.matches("<g class=\"lane\"").count(), layout.lanes.len(), "a lane per host, no more");
    assert!(layout.messages.len() >= 5, "the trace has messages: {:?}", layout.messages);
    assert_eq!(dom.matches("<g class=\"msg ").count(), layout.messages.len(), "an arrow per correlated message");
    for message in &layout.messages {
        let arrow = format!("data-send=\"{}\" data-recv=\"{}\"", message.send, message.recv);
        assert!(dom.contains(&arrow), "an arrow {arrow}");
    }
    for violation in &outcome.violations {
        let marker = format!("class=\"violation-marker\" data-ev=\"{}\" data-invariant=\"{}\"", violation.event_index, violation.invariant);
        assert!(dom.contains(&marker), "a marker for {violation}");
        assert!(dom.contains(&format!("href=\"#ev-{}\"", violation.event_index)), "a jump link for {violation}");
    }
    assert!(dom.contains(&format!("{:016x}", outcome.trace.hash())), "the trace hash in the header");
    eprintln!("browser: {} events, {} bytes, dump-dom in {took:?}", outcome.trace.events.len(), std::fs::metadata(&page).unwrap().len());

    // The script's filter and selection, driven through the page's fragment.
    let violation = &outcome.violations[0];
    let rid = view::correlate::request_id(&outcome.trace.events[violation.event_index]);
    assert!(!rid.is_empty(), "the violating event is about a request");
    let (filtered, _) = chromium_run(&browser, &dir, &page, &format!("#filter={rid}"), &dump);
    assert!(filtered.contains(&format!("elements about request {rid}")), "the filter ran");
    let dimmed = filtered.matches(" dim\"").count();
    let kept = filtered.matches(&format!("data-rid=\"{rid}\"")).count();
    assert!(dimmed > 0 && kept > 0, "the filter dims other requests ({dimmed}) and keeps request {rid}'s ({kept})");
    let (selected, _) = chromium_run(&browser, &dir, &page, &format!("#event={}", violation.event_index), &dump);
    let event = &outcome.trace.events[violation.event_index];
    assert!(
        selected.contains("<table>") && selected.contains(&format!("<td>{}</td>", event.kind)),
        "selecting the violating event shows its fields"
    );

    // A screenshot of the page, and one of an empty page to tell a blank picture from it.
    let shot = dir.join("trace.png");
    let size = "--window-size=1400,900".to_string();
    chromium_run(&browser, &dir, &page, "", &[size.clone(), format!("--screenshot={}", shot.display())]);
    let blank_page = dir.join("blank.html");
    std::fs::write(&blank_page, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank = dir.join("blank.png");
    chromium_run(&browser, &dir, &blank_page, "", &[size, format!("--screenshot={}", blank.display())]);
    let (ours, empty) = (std::fs::read(&shot).unwrap(), std::fs::read(&blank).unwrap());
    assert_eq!(png_size(&ours), (1400, 900));
    assert_eq!(png_size(&empty), (1400, 900));
    assert!(
        ours.len() > 8 * empty.len() && ours.len() > 20_000,
        "the screenshot looks blank: {} bytes against {} for an empty page",
        ours.len(),
        empty.len()
    );
}

/// An sdk run's page (rmcp's bridge records nothing of its own, against either server): the
/// client's lines and the server's log are paired through the bridge, calls and their answers
/// each drawn as an arrow, none hop by hop.
#[test]
fn an_sdk_trace_is_drawn_through_the_bridge() {
    for family in [&harness::sdk::SDK, &harness::sdk::SDK_RMCP] {
        let token = Token::new(family, &[], hunt::case_seed(0x0031_0031, 0)).unwrap();
        let outcome = run(&hunt::generate(&token).current());
        assert!(outcome.trace.of_kind("http.post").any(|(_, e)| e.text("method") == "tools/call"), "{token}: a case with calls");
        let layout = Layout::new(&outcome.trace, &outcome.violations);
        assert!(layout.messages.iter().all(|m| m.hop == view::correlate::Hop::Bridged), "{token}: {:?}", layout.messages);
        assert!(layout.messages.iter().any(|m| m.label == "tools/call"), "{token}: calls drawn");
        assert!(layout.messages.iter().any(|m| m.label == "result"), "{token}: answers drawn");
    }
}

/// A live run's trace is drawn with the verdicts the live oracles give it, the same `check`
/// prints, not with the simulated family's checkers: here a refused POST never sent again, which
/// a bridge whose profile promises no retries (this trace's `promises` is empty) is not judged by.
#[test]
fn view_marks_a_live_trace_by_its_live_verdicts() {
    let dir = scratch("live");
    let lines = [
        r#"{"at_ms":0,"host":"sim","kind":"run.spec","fields":{"family":"relay","engine":"live","call_timeout_ms":60000,"sweep_period_ms":5000,"slack_ms":500,"horizon_ms":60000,"speed":1,"sse_idle_ms":3000,"bugs":"","profile":"","promises":"","exit_within_ms":5000}}"#,
        r#"{"at_ms":0,"host":"bridge","kind":"process.start","fields":{"command":"bridge {url}","pid":1,"transport":"sse","url":"http://127.0.0.1:1/sse"}}"#,
        r#"{"at_ms":10,"host":"relayer","kind":"stream.open","fields":{"session":"s1","style":"lf"}}"#,
        r#"{"at_ms":100,"host":"relayer","kind":"http.post","fields":{"session":"s1","id":"\"probe\"","client_id":"","note":"","method":"initialize","action":"","key":"","status":429,"cause":"fault"}}"#,
        r#"{"at_ms":20000,"host":"client","kind":"client.eof","fields":{"reason":"end"}}"#,
        r#"{"at_ms":20100,"host":"bridge","kind":"process.exit","fields":{"code":"0","signal":"","by":"self"}}"#,
    ];
    let jsonl = dir.join("live.jsonl");
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let (code, out, err) = harness_cli(&["check", jsonl.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("--- violations (0)"), "{out}");
    let html = dir.join("live.html");
    let (code, out, err) = harness_cli(&["view", jsonl.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(" 0 violations marked"), "{out}");
}
