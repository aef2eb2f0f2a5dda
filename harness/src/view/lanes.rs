//! Lanes: one per host, in a fixed order, so the same family always draws the same columns.

use crate::trace::Trace;

/// Every known host, left to right: the MCP client side first, then the component under test,
/// then its peers, and the harness's own `sim` lane (spec, faults) last. A host this list does
/// not know (a trace recorded elsewhere) gets a lane after these, in order of first appearance.
pub const ORDER: &[&str] = &["client", "agent", "cli", "bridge", "daemon", "relayer", "gateway", "mcp", "oauth", "browser", "sim"];

/// The lanes of a trace: the hosts it mentions, in [`ORDER`].
pub fn lanes(trace: &Trace) -> Vec<String> {
    let mut known: Vec<&str> = ORDER.iter().copied().filter(|h| trace.events.iter().any(|e| e.host == *h)).collect();
    let mut extra: Vec<&str> = Vec::new();
    for event in &trace.events {
        let host = event.host.as_str();
        if !ORDER.contains(&host) && !extra.contains(&host) {
            extra.push(host);
        }
    }
    known.extend(extra);
    known.into_iter().map(str::to_string).collect()
}

/// The lane index of each event.
pub fn lane_of(trace: &Trace, lanes: &[String]) -> Vec<usize> {
    trace.events.iter().map(|e| lanes.iter().position(|l| *l == e.host).unwrap_or(0)).collect()
}
