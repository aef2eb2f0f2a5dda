//! The relay checkers of the MCP handshake, as the relayer saw it: every session that carries
//! the client's requests was initialized first, hears `notifications/initialized` once and only
//! after the client sent its own, and was initialized with the client's own `initialize` params,
//! so the server knows the client it serves (its name, protocol version and capabilities).

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::Facts;
use crate::check::{capped, message};
use crate::trace::Violation;
use crate::verdicts;

/// Every session that carries a request was initialized first: the relayer received an
/// `initialize` on it (accepted, or refused by a fault the bridge then met) before any other
/// request but `ping`. And the lifecycle's second half, `notifications/initialized`: the relayer
/// receives it only once the client has sent its own, once per initialized session, and once the
/// client has sent it, every session that accepted an `initialize` receives the notification
/// before any request the client sent after it.
pub fn sessions_initialized(facts: &Facts<'_>) -> Vec<Violation> {
    const NOTE: &str = "notifications/initialized";
    let mut initialized = BTreeSet::new();
    let mut found = Vec::new();
    // A request on it (an answer to the server's own request, with an id and no method, may be
    // the bridge's: mcp-remote answers the server's ping on its probe session itself).
    let serves_client = |session: &str| {
        facts.stories.all_posts.iter().any(|(_, _, s, id, method, status)| {
            s == session && !id.is_empty() && !method.is_empty() && method != "initialize" && *status == 202
        })
    };
    let client_note = facts.trace.events.iter().enumerate().find(|(_, e)| {
        let msg = message(e);
        e.host == host::CLIENT && e.kind == kind::MCP_SEND && msg.get("method").and_then(Value::as_str) == Some(NOTE) && msg.get("id").is_none()
    });
    let client_note = client_note.map(|(index, e)| (index, e.at_ms));
    // Per session: the first `initialize` it accepted and the first `notifications/initialized`.
    let mut accepted_init: BTreeMap<&str, usize> = BTreeMap::new();
    let mut noted: BTreeMap<&str, usize> = BTreeMap::new();
    // Per session: the latest accepted `initialize` and `notifications/initialized`.
    let (mut last_init, mut last_note): (BTreeMap<&str, usize>, BTreeMap<&str, usize>) = Default::default();
    for (index, at, session, id, method, status) in &facts.stories.all_posts {
        if method == "initialize" {
            // An `initialize` the relayer refused (an HTTP status the bridge read) initialized
            // nothing; one it accepted, or whose answer a reset kept from the bridge, may have
            // (live, mcp-remote over HTTP+SSE, `live.v1.relay.none.3ee4d3cfde965c52`: a
            // re-initialization refused once, then calls on that session; harness error H5).
            if *status == 202 || facts.stories.reset_after_admit.contains(index) {
                initialized.insert(session.clone());
            }
            if *status == 202 {
                accepted_init.entry(session.as_str()).or_insert(*index);
            }
        }
        if method == "initialize" && *status == 202 {
            last_init.insert(session.as_str(), *index);
        }
        // Each `notifications/initialized` the relayer accepted is one verdict (sent once per
        // handshake, and only after the client's own), each request it accepted another (on a
        // session initialized first).
        let flagged = found.len();
        if method == NOTE && id.is_empty() && *status == 202 {
            // Once per `initialize`: a second one is a second handshake the server never
            // asked for.
            let since = last_init.get(session.as_str()).copied().unwrap_or(0);
            // A note whose answer a reset lost (`post_reset` after admission) is sent again: the
            // bridge never saw it accepted.
            let unseen = |before: usize| facts.stories.reset_after_admit.contains(&before);
            if last_note.insert(session.as_str(), *index).is_some_and(|before| before > since && !unseen(before)) {
                let detail = format!("the relayer received {NOTE} on session {session} at {at} ms a second time");
                found.push(facts.violation("sessions_initialized", *index, detail));
            }
        }
        if method == NOTE && id.is_empty() {
            noted.entry(session.as_str()).or_insert(*index);
            // Only a session that serves the client speaks for it: a bridge may open one of its
            // own first, with its own handshake (mcp-remote probes the transport with a session
            // it initializes as `mcp-remote-fallback-test` and never uses again).
            if client_note.is_none_or(|(_, sent)| sent > *at + facts.slack_ms) && serves_client(session) {
                let detail = format!("the relayer received {NOTE} on session {session} at {at} ms, but the client had not sent it");
                found.push(facts.violation("sessions_initialized", *index, detail));
            }
            if *status == 202 && found.len() == flagged {
                verdicts::held();
            }
        }
        if *status != 202 || id.is_empty() {
            continue;
        }
        if method == "initialize" {
            continue;
        } else if method != "ping" {
            if initialized.contains(session) {
                verdicts::held();
            } else {
                let detail = format!("{method} id {id} on session {session}, which was never initialized");
                found.push(facts.violation("sessions_initialized", *index, detail));
            }
        }
    }
    let Some((note_index, note_at)) = client_note else { return capped(found) };
    for (n, request) in facts.requests.iter().enumerate() {
        // A request no session accepted reached none early: nothing to judge.
        let reached = facts.stories.of[n].posts.iter().any(|post| post.status == 202);
        if request.index < note_index || !request.judged() || request.method == "ping" || !reached {
            continue;
        }
        let post = facts.stories.of[n].posts.iter().find(|post| {
            let after_init = accepted_init.get(post.session.as_str()).is_some_and(|init| *init < post.index);
            post.status == 202 && after_init && noted.get(post.session.as_str()).is_none_or(|note| *note > post.index)
        });
        if let Some(post) = verdicts::judging(post) {
            let id = request.id.as_deref().unwrap_or("");
            let detail = format!(
                "{} id {id} reached session {} at {} ms before {NOTE}, which the client had sent at {note_at} ms",
                request.method, post.session, post.at_ms
            );
            found.push(facts.violation("sessions_initialized", post.index, detail));
        }
    }
    capped(found)
}

/// The client's handshake reaches the relayer: every request of the client's that the relayer
/// accepted after the client sent its `initialize` ran on a session the relayer initialized with
/// those very params (`rpc.initialize`), not with params the bridge made up before the client
/// spoke. A server that never saw the client's capabilities serves another client than the user's.
pub fn handshake_carried(facts: &Facts<'_>) -> Vec<Violation> {
    let client_init = facts.trace.events.iter().enumerate().find(|(_, e)| {
        e.host == host::CLIENT && e.kind == kind::MCP_SEND && message(e).get("method").and_then(Value::as_str) == Some("initialize")
    });
    let Some((init_index, init)) = client_init else { return Vec::new() };
    let params = message(init).get("params").cloned().unwrap_or(Value::Null);
    // Per session, the params of each `initialize` the relayer served: (event index, params).
    let mut served: BTreeMap<String, Vec<(usize, Value)>> = BTreeMap::new();
    for (index, event) in facts.trace.of_kind(kind::RPC_INITIALIZE) {
        let params = serde_json::from_str(&event.text("params")).unwrap_or(Value::Null);
        served.entry(event.text("session")).or_default().push((index, params));
    }
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        if !request.judged() || request.index < init_index || request.method == "ping" {
            continue;
        }
        for post in facts.stories.of[n].posts.iter().filter(|p| p.status == 202) {
            let latest = served.get(&post.session).and_then(|inits| inits.iter().rfind(|(i, _)| *i < post.index));
            // A session no `initialize` was served on is `sessions_initialized`'s to judge.
            let Some((_, used)) = latest else { continue };
            if *used == params {
                verdicts::held();
                continue;
            }
            let name = |p: &Value| p.pointer("/clientInfo/name").map_or("none".to_string(), Value::to_string);
            let detail = format!(
                "{} id {} ran on session {}, initialized as client {} (protocol {}), not with the client's own initialize (client {}, protocol {})",
                request.method,
                request.id.as_deref().unwrap_or(""),
                post.session,
                name(used),
                used.get("protocolVersion").unwrap_or(&Value::Null),
                name(&params),
                params.get("protocolVersion").unwrap_or(&Value::Null),
            );
            found.push(facts.violation("handshake_carried", post.index, detail));
            break;
        }
    }
    capped(found)
}
