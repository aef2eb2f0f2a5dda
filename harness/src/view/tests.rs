//! The layout's rules on hand-built traces: lanes, correlation, folding, compression, faults.

use serde_json::json;

use super::correlate::{messages, Hop};
use super::layout::Layout;
use super::timeline::{IDLE_H, ROW_H, TOP};
use super::{fold, lanes, page, Header};
use crate::trace::{Trace, TraceEvent};

fn ev(at_ms: u64, host: &str, kind: &str, fields: &[(&str, serde_json::Value)]) -> TraceEvent {
    TraceEvent::new(at_ms, host, kind, fields)
}

/// A relay exchange: a call admitted, POSTed, answered on SSE and written back.
fn relay_call() -> Trace {
    Trace {
        events: vec![
            ev(0, "sim", "run.spec", &[("family", json!("relay"))]),
            ev(0, "relayer", "relayer.start", &[("boot", json!(1))]),
            ev(0, "bridge", "sse.connect", &[("gen", json!(1)), ("attempt", json!(0))]),
            ev(50, "relayer", "stream.open", &[("session", json!("s1"))]),
            ev(100, "bridge", "sse.endpoint", &[("gen", json!(1)), ("session", json!("s1"))]),
            ev(300, "client", "mcp.send", &[("msg", json!(r#"{"id":1,"jsonrpc":"2.0","method":"tools/call"}"#))]),
            ev(350, "bridge", "call.admit", &[("id", json!("1")), ("method", json!("tools/call"))]),
            ev(350, "bridge", "post.send", &[("id", json!("1")), ("method", json!("tools/call"))]),
            ev(450, "relayer", "http.post", &[("id", json!("1")), ("method", json!("tools/call")), ("status", json!(202))]),
            ev(450, "bridge", "post.status", &[("id", json!("1")), ("status", json!(202))]),
            ev(550, "relayer", "reply.sent", &[("id", json!("1"))]),
            ev(600, "bridge", "call.reply", &[("id", json!("1")), ("source", json!("upstream"))]),
            ev(600, "client", "mcp.recv", &[("msg", json!(r#"{"id":1,"jsonrpc":"2.0","result":{}}"#))]),
        ],
    }
}

#[test]
fn lanes_follow_the_fixed_order_whatever_the_trace_order() {
    let trace = relay_call();
    assert_eq!(lanes::lanes(&trace), ["client", "bridge", "relayer", "sim"]);
    let mut other = trace.clone();
    other.events.push(ev(700, "zeta", "x", &[]));
    other.events.push(ev(700, "alpha", "x", &[]));
    other.events.reverse();
    assert_eq!(lanes::lanes(&other), ["client", "bridge", "relayer", "sim", "alpha", "zeta"]);
}

#[test]
fn every_hop_of_a_relay_call_is_one_arrow() {
    let found: Vec<(usize, usize, Hop, String)> =
        messages(&relay_call()).into_iter().map(|m| (m.send, m.recv, m.hop, m.label)).collect();
    assert_eq!(
        found,
        vec![
            (2, 3, Hop::HttpPost, "GET /sse".to_string()),
            (3, 4, Hop::Sse, "endpoint".to_string()),
            (5, 6, Hop::StdioIn, "tools/call".to_string()),
            (7, 8, Hop::HttpPost, "POST tools/call".to_string()),
            (8, 9, Hop::HttpStatus, "202".to_string()),
            (10, 11, Hop::Sse, "reply".to_string()),
            (11, 12, Hop::StdioOut, "upstream".to_string()),
        ]
    );
}

#[test]
fn a_receive_pairs_with_the_oldest_send_of_its_id_and_a_lost_one_gets_no_arrow() {
    let trace = Trace {
        events: vec![
            ev(0, "relayer", "reply.sent", &[("id", json!("7"))]),
            ev(1, "relayer", "reply.sent", &[("id", json!("7"))]),
            ev(2, "relayer", "reply.sent", &[("id", json!("8"))]),
            ev(3, "bridge", "call.reply", &[("id", json!("7")), ("source", json!("upstream"))]),
            ev(4, "bridge", "reply.dropped", &[("id", json!("7")), ("reason", json!("unknown"))]),
        ],
    };
    let pairs: Vec<(usize, usize)> = messages(&trace).iter().map(|m| (m.send, m.recv)).collect();
    assert_eq!(pairs, vec![(0, 3), (1, 4)]);
}

#[test]
fn daemon_and_channel_hops_correlate_by_request_id() {
    let trace = Trace {
        events: vec![
            ev(0, "cli", "cli.send", &[("id", json!("a1.1")), ("msg", json!(r#"{"id":"a1.1","method":"listTools"}"#))]),
            ev(10, "daemon", "daemon.request", &[("id", json!("a1.1")), ("method", json!("listTools"))]),
            ev(20, "daemon", "daemon.reply", &[("id", json!("a1.1")), ("ok", json!(true)), ("code", json!(""))]),
            ev(30, "cli", "cli.reply", &[("id", json!("a1.1"))]),
            ev(40, "gateway", "gateway.send", &[("event", json!("approval_request")), ("id", json!("q")), ("delivered", json!(true))]),
            ev(41, "gateway", "gateway.send", &[("event", json!("approval_request")), ("id", json!("r")), ("delivered", json!(false))]),
            ev(50, "bridge", "pending.add", &[("map", json!("approval")), ("id", json!("q"))]),
            ev(60, "agent", "mcp.send", &[("msg", json!(r#"{"jsonrpc":"2.0","method":"notifications/claude/channel/permission_request","params":{"request_id":"abcde"}}"#))]),
            ev(70, "bridge", "pending.add", &[("map", json!("permission")), ("id", json!("abcde"))]),
            ev(80, "bridge", "decision.sent", &[("id", json!("abcde")), ("behavior", json!("deny"))]),
            ev(80, "agent", "mcp.recv", &[("msg", json!(r#"{"jsonrpc":"2.0","method":"notifications/claude/channel/permission","params":{"request_id":"abcde"}}"#))]),
        ],
    };
    let found: Vec<(usize, usize, Hop)> = messages(&trace).into_iter().map(|m| (m.send, m.recv, m.hop)).collect();
    assert_eq!(
        found,
        vec![
            (0, 1, Hop::Socket),
            (2, 3, Hop::Socket),
            (4, 6, Hop::WebSocket),
            (7, 8, Hop::StdioIn),
            (9, 10, Hop::StdioOut),
        ]
    );
}

#[test]
fn frames_fold_into_one_run_per_lane_and_request() {
    let mut events = vec![ev(0, "cli", "cli.send", &[("id", json!("a1.1"))])];
    for n in 0..5u64 {
        events.push(ev(10 + n * 100, "cli", "cli.frame", &[("id", json!("a1.1")), ("matched", json!(true))]));
        // Another lane in between does not break the run.
        events.push(ev(11 + n * 100, "mcp", "server.recv", &[("msg", json!("{}"))]));
    }
    events.push(ev(600, "cli", "cli.reply", &[("id", json!("a1.1"))]));
    // Two frames are drawn one by one.
    events.push(ev(700, "cli", "cli.frame", &[("id", json!("a2.1"))]));
    events.push(ev(800, "cli", "cli.frame", &[("id", json!("a2.1"))]));
    let trace = Trace { events };
    let runs = fold::runs(&trace);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].events, vec![1, 3, 5, 7, 9]);
    assert!(runs[0].label.starts_with("5× cli.frame a1.1 (10–410 ms)"), "{}", runs[0].label);
    let layout = Layout::new(&trace, &[]);
    // The run's head has a row; the four other frames do not.
    let drawn = layout.timeline.drawn.iter().filter(|d| **d).count();
    assert_eq!(drawn, trace.events.len() - 4);
    assert_eq!(layout.run_of[5], Some(0));
}

#[test]
fn long_idle_spans_are_one_band_and_short_gaps_none() {
    let trace = Trace {
        events: vec![
            ev(0, "client", "a", &[]),
            ev(900, "client", "b", &[]),
            ev(240_900, "client", "c", &[]),
            // a receiver stamped a tick early: not a gap
            ev(240_850, "bridge", "d", &[]),
        ],
    };
    let layout = Layout::new(&trace, &[]);
    let timeline = &layout.timeline;
    assert_eq!(timeline.idle.len(), 1);
    assert_eq!((timeline.idle[0].from_ms, timeline.idle[0].to_ms), (900, 240_900));
    assert!(timeline.idle[0].label().starts_with("⋯ 4 min 0 s idle"), "{}", timeline.idle[0].label());
    assert_eq!(timeline.y, vec![TOP, TOP + ROW_H, TOP + 2 * ROW_H + IDLE_H, TOP + 3 * ROW_H + IDLE_H]);
    // Four minutes cost one band: the height is four rows, the band and a bottom margin.
    assert_eq!(timeline.height, TOP + 5 * ROW_H + IDLE_H);
}

#[test]
fn fault_windows_pair_start_and_end_and_the_heal_is_found() {
    let detail = |d: &str| json!(d);
    let trace = Trace {
        events: vec![
            ev(0, "sim", "fault.injected", &[("fault", json!("link_hold")), ("phase", json!("start")), ("detail", detail("A"))]),
            ev(5, "sim", "fault.injected", &[("fault", json!("link_hold")), ("phase", json!("start")), ("detail", detail("B"))]),
            ev(6, "sim", "fault.injected", &[("fault", json!("late_reply")), ("phase", json!("start")), ("detail", detail("C"))]),
            ev(9, "sim", "fault.injected", &[("fault", json!("link_hold")), ("phase", json!("end")), ("detail", detail("B"))]),
            ev(10, "sim", "fault.injected", &[("fault", json!("link_hold")), ("phase", json!("end")), ("detail", detail("A"))]),
            ev(10, "sim", "fault.injected", &[("fault", json!("heal")), ("phase", json!("start")), ("detail", detail(""))]),
        ],
    };
    let layout = Layout::new(&trace, &[]);
    let windows: Vec<(&str, usize, Option<usize>)> =
        layout.windows.iter().map(|w| (w.name.as_str(), w.start, w.end)).collect();
    assert_eq!(windows, vec![("link_hold", 0, Some(4)), ("link_hold", 1, Some(3)), ("late_reply", 2, None)]);
    assert_eq!(layout.heal, Some(5));
}

#[test]
fn the_page_is_self_contained_and_marks_everything() {
    let trace = relay_call();
    let violation = trace.violation("one_reply_per_id", 12, "id 1 answered <twice>".to_string());
    let html = page(&trace, &[violation], &Header { title: "v1.relay.none.0".into(), summary: "1 step".into(), hash: trace.hash() });
    for needle in ["http://", "https://", "src=", "@import", "url(http"] {
        let allowed = needle == "http://" && html.matches(needle).count() == html.matches("http://www.w3.org/2000/svg").count();
        assert!(!html.contains(needle) || allowed, "the page must fetch nothing: found {needle}");
    }
    assert_eq!(html.matches("<g class=\"lane\"").count(), 4);
    assert_eq!(html.matches("<g class=\"msg ").count(), 7);
    assert_eq!(html.matches("class=\"violation-marker\"").count(), 1);
    assert!(html.contains("href=\"#ev-12\""));
    assert!(html.contains("id 1 answered &lt;twice&gt;"));
    assert!(html.contains(&format!("{:016x}", trace.hash())));
    assert!(!html.contains("</script><"), "script data must not close its tag early");
}

/// An sdk exchange: the bridge records nothing, so only the client's stdio and the server's log
/// show the messages.
fn opaque_bridge_call() -> Trace {
    Trace {
        events: vec![
            ev(0, "sim", "run.spec", &[("family", json!("sdk"))]),
            ev(0, "client", "mcp.send", &[("msg", json!(r#"{"id":0,"jsonrpc":"2.0","method":"initialize","params":{"_meta":{"sim.relay/clientId":0}}}"#))]),
            ev(50, "client", "mcp.recv", &[("msg", json!(r#"{"jsonrpc":"2.0","id":0,"result":{"serverInfo":{"name":"rmcp"}}}"#))]),
            // The bridge's own initialize: the server falls back to its upstream id, 0.
            ev(450, "relayer", "http.post", &[("id", json!("0")), ("client_id", json!("0")), ("note", json!("")), ("method", json!("initialize")), ("status", json!(200))]),
            ev(450, "relayer", "reply.sent", &[("id", json!("0")), ("client_id", json!("0")), ("msg", json!(r#"{"id":0,"jsonrpc":"2.0","result":{"serverInfo":{"name":"mock"}}}"#))]),
            ev(500, "client", "mcp.send", &[("msg", json!(r#"{"id":"r2","jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"sim.relay/clientId":"r2"}}}"#))]),
            ev(600, "relayer", "http.post", &[("id", json!("1")), ("client_id", json!("\"r2\"")), ("note", json!("")), ("method", json!("tools/call")), ("status", json!(200))]),
            ev(650, "client", "mcp.send", &[("msg", json!(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"sim.client/note":4}}}"#))]),
            ev(700, "relayer", "http.post", &[("id", json!("")), ("client_id", json!("")), ("note", json!("4")), ("method", json!("notifications/progress")), ("status", json!(202))]),
            ev(900, "relayer", "reply.sent", &[("id", json!("1")), ("client_id", json!("\"r2\"")), ("msg", json!(r#"{"id":1,"jsonrpc":"2.0","result":{"content":[{"text":"done","type":"text"}],"isError":false}}"#))]),
            // rmcp re-serializes: other key order, the client's id back.
            ev(950, "client", "mcp.recv", &[("msg", json!(r#"{"jsonrpc":"2.0","id":"r2","result":{"isError":false,"content":[{"type":"text","text":"done"}]}}"#))]),
            // The server answers request 3 (stamped "r3"), the bridge writes an error of its own.
            ev(1000, "client", "mcp.send", &[("msg", json!(r#"{"id":"r3","jsonrpc":"2.0","method":"ping","params":{"_meta":{"sim.relay/clientId":"r3"}}}"#))]),
            ev(1100, "relayer", "http.post", &[("id", json!("2")), ("client_id", json!("\"r3\"")), ("note", json!("")), ("method", json!("ping")), ("status", json!(200))]),
            ev(1100, "relayer", "reply.sent", &[("id", json!("2")), ("client_id", json!("\"r3\"")), ("msg", json!(r#"{"id":2,"jsonrpc":"2.0","result":{}}"#))]),
            ev(1200, "client", "mcp.recv", &[("msg", json!(r#"{"jsonrpc":"2.0","id":"r3","error":{"code":-32603,"message":"transport closed"}}"#))]),
        ],
    }
}

#[test]
fn through_an_opaque_bridge_the_boundaries_pair_by_client_id_note_and_answer() {
    let trace = opaque_bridge_call();
    let found: Vec<(usize, usize, Hop, String)> =
        messages(&trace).into_iter().map(|m| (m.send, m.recv, m.hop, m.label)).collect();
    assert_eq!(
        found,
        vec![
            (5, 6, Hop::Bridged, "tools/call".to_string()),
            (7, 8, Hop::Bridged, "progress".to_string()),
            (9, 10, Hop::Bridged, "result".to_string()),
            (11, 12, Hop::Bridged, "ping".to_string()),
        ],
        "neither initialize pairs with the other, and the bridge's own error borrows no reply"
    );
    let html = page(&trace, &[], &Header { title: "v1.sdk.none.0".into(), summary: "3 steps".into(), hash: trace.hash() });
    assert_eq!(html.matches("<g class=\"msg hop-bridged\"").count(), 4);
}

#[test]
fn a_bridge_that_records_its_own_events_is_drawn_hop_by_hop_not_through() {
    let mut trace = relay_call();
    // The relayer's log names the client's id as it does in every family.
    for event in &mut trace.events {
        if event.kind == "http.post" || event.kind == "reply.sent" {
            event.fields.push(("client_id".to_string(), json!("1")));
        }
    }
    assert!(messages(&trace).iter().all(|m| m.hop != Hop::Bridged));
    assert_eq!(messages(&trace).len(), 7);
}
