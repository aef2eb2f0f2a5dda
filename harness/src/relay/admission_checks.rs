//! The relay checker about what the relayer refused, as the relayer explains it: a strict MCP
//! server refuses a POST or a stream for a cause it logs, and only some causes lie outside the
//! bridge. A bridge that drops its token on a retry, posts to a session it made up, or sends a
//! body that is not JSON gets a refusal that other checkers read as a fault's doing.

use bridge_under_test::events::kind;

use super::checks::Facts;
use crate::check::capped;
use crate::trace::Violation;
use crate::verdicts;

/// Causes of a refusal that only the bridge can have made: a missing or wrong bearer token, a
/// session the relayer never issued, a content type other than JSON, a body that is not JSON.
const BRIDGES_MAKING: &[&str] = &["token", "unknown", "content_type", "malformed"];

/// Every POST and every stream the bridge opens is one a strict relayer admits, or refuses only
/// for a cause outside the bridge (an injected refusal, a reset, a session it issued and has
/// since closed or lost): never for its token, a session it never issued, or its body; and no
/// `initialize` it sends lacks the params the MCP schema requires.
pub fn requests_admissible(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::HTTP_POST) {
        let cause = event.text("cause");
        if BRIDGES_MAKING.contains(&cause.as_str()) {
            let detail = format!(
                "the relayer refused a POST of {} {} to session {} with HTTP {}: {}",
                event.text("method"),
                event.text("id"),
                event.text("session"),
                event.num("status"),
                explain(&cause)
            );
            found.push(facts.violation("requests_admissible", index, detail));
        } else {
            verdicts::held();
        }
    }
    for (index, event) in facts.trace.of_kind(kind::RPC_REFUSED).filter(|(_, e)| e.text("reason") == "invalid_params") {
        let detail = format!("the relayer refused {} {} on session {}: its params lack what the MCP schema requires", event.text("method"), event.text("id"), event.text("session"));
        found.push(facts.violation("requests_admissible", index, detail));
    }
    for (index, event) in facts.trace.of_kind(kind::STREAM_REFUSED) {
        let cause = event.text("cause");
        let detail = format!("the relayer refused a stream with HTTP {}: {}", event.num("status"), explain(&cause));
        found.push(facts.violation("requests_admissible", index, detail));
    }
    capped(found)
}

fn explain(cause: &str) -> &'static str {
    match cause {
        "token" => "the bearer token was missing or wrong",
        "unknown" => "the relayer never issued that session",
        "content_type" => "the body was not sent as application/json",
        "malformed" => "the body was not JSON",
        _ => "a cause the bridge made",
    }
}
