//! Folding: a run of keep-alive or progress frames on one lane becomes one marked run, so a
//! request that streams forty frames reads as one bar, not forty rows.

use crate::check::message;
use crate::trace::{Trace, TraceEvent};

use super::correlate::request_id;

/// Runs shorter than this are drawn event by event.
pub const MIN_RUN: usize = 3;

/// A folded run: its events (indices, in order), all on one lane, about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub events: Vec<usize>,
    pub label: String,
}

/// What makes an event a frame that may fold: its kind and the request it is about, or `None`.
pub fn frame_key(event: &TraceEvent) -> Option<String> {
    match event.kind.as_str() {
        // A daemon progress frame, as the CLI reads it.
        "cli.frame" => Some(format!("cli.frame {}", event.text("id"))),
        // A drain poll while the CLI waits for a daemon to go idle.
        "cli.probe" => Some(format!("cli.probe {}", event.text("target"))),
        // MCP progress notifications and SSE keep-alives, should a trace carry them.
        "mcp.recv" | "mcp.send" => {
            let msg = message(event);
            let method = msg.get("method").and_then(serde_json::Value::as_str)?;
            (method == "notifications/progress").then(|| format!("{} progress {}", event.kind, request_id(event)))
        }
        "sse.keepalive" | "keepalive" => Some(event.kind.clone()),
        _ => None,
    }
}

/// The folded runs of a trace. A run goes on while the next event on the same host is a frame
/// with the same key: events on other lanes in between do not break it.
pub fn runs(trace: &Trace) -> Vec<Run> {
    let mut out = Vec::new();
    // Per host: the run being built.
    let mut building: Vec<(String, String, Vec<usize>)> = Vec::new();
    let flush = |run: (String, String, Vec<usize>), out: &mut Vec<Run>| {
        if run.2.len() >= MIN_RUN {
            out.push(Run { label: label(trace, &run.1, &run.2), events: run.2 });
        }
    };
    for (index, event) in trace.events.iter().enumerate() {
        let key = frame_key(event);
        let slot = building.iter().position(|(host, _, _)| *host == event.host);
        match (slot, key) {
            (Some(at), Some(key)) if building[at].1 == key => building[at].2.push(index),
            (Some(at), key) => {
                let run = building.remove(at);
                flush(run, &mut out);
                if let Some(key) = key {
                    building.push((event.host.clone(), key, vec![index]));
                }
            }
            (None, Some(key)) => building.push((event.host.clone(), key, vec![index])),
            (None, None) => {}
        }
    }
    for run in building {
        flush(run, &mut out);
    }
    out.sort_by_key(|run| run.events[0]);
    out
}

fn label(trace: &Trace, key: &str, events: &[usize]) -> String {
    let first = trace.events[events[0]].at_ms;
    let last = trace.events[events[events.len() - 1]].at_ms;
    let what = key.split(' ').next().unwrap_or(key);
    let about = key.split_once(' ').map_or("", |(_, rest)| rest);
    format!("{}× {what} {about} ({first}–{last} ms)", events.len())
}
