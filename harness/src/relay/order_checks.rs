//! The relay checkers about the pump, as the relayer sees it. Order: on each session, the
//! client's messages the relayer accepted arrive in the order the client wrote them. The bridge's
//! pump posts one message at a time in admission order, and replays what a new session is owed
//! in that order too, so a tool call never overtakes the cancellation or the call written before
//! it. Progress: while a request waits to be posted on a healthy session, the pump never idles.

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client::note_step;
use serde_json::Value;

use super::checks::Facts;
use super::outcome_checks::CONNECT_MS;
use crate::check::{capped, message};
use crate::trace::Violation;
use crate::verdicts;

/// One accepted arrival: the relayer's `http.post` index, the client's write index, a label.
type Arrival = (usize, usize, String);

/// On each session, the client messages the relayer accepted (2xx) and served arrive in the
/// client's write order: requests by their story (which POST carried which request), notifications by the step
/// the client stamped in their `_meta` and the relayer logged (`http.post note=`). The bridge's
/// own `initialize` and `notifications/initialized` are not the client's and are not judged.
pub fn client_order_kept(facts: &Facts<'_>) -> Vec<Violation> {
    let mut arrivals: BTreeMap<String, Vec<Arrival>> = BTreeMap::new();
    for (request, story) in facts.requests.iter().zip(&facts.stories.of) {
        let label = || format!("{} id {}", request.method, request.id.as_deref().unwrap_or("?"));
        for (k, post) in story.posts.iter().enumerate().filter(|(_, p)| (200..300).contains(&p.status)) {
            // A POST the relayer accepted and then refused to serve (the session was not yet
            // initialized) delivered nothing: the bridge sends it again, and that is its arrival.
            let next = story.posts.get(k + 1).map_or(usize::MAX, |p| p.index);
            let refused = story.refusals.iter().any(|r| r.session == post.session && (post.index..next).contains(&r.index));
            if !refused {
                arrivals.entry(post.session.clone()).or_default().push((post.index, request.index, label()));
            }
        }
    }
    let mut notes: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (index, event) in facts.trace.of_kind(kind::MCP_SEND).filter(|(_, e)| e.host == host::CLIENT) {
        let msg = message(event);
        if let Some(step) = note_step(&msg) {
            let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_string();
            notes.insert(step.to_string(), (index, method));
        }
    }
    for (index, event) in facts.trace.of_kind(kind::HTTP_POST) {
        let (note, status) = (event.text("note"), super::story::post_status(event));
        if let Some((written, method)) = notes.get(&note).filter(|_| (200..300).contains(&status)) {
            let label = format!("{method} (step {note})");
            arrivals.entry(event.text("session")).or_default().push((index, *written, label));
        }
    }
    let mut found = Vec::new();
    for (session, mut arrived) in arrivals {
        arrived.sort();
        // The arrival written latest so far: an arrival written before it came late.
        let mut latest: Option<&Arrival> = None;
        for arrival in &arrived {
            match latest {
                Some(later) if arrival.1 < later.1 => {
                    let detail = format!(
                        "on session {session}, {} reached the relayer after {}, which the client \
                         wrote after it",
                        arrival.2, later.2
                    );
                    found.push(facts.violation("client_order_kept", arrival.0, detail));
                }
                _ => {
                    // The session's first arrival has nothing to come after.
                    if latest.is_some() {
                        verdicts::held();
                    }
                    latest = Some(arrival);
                }
            }
        }
    }
    capped(found)
}

/// Progress: a request no fault touched, written while the session that first received it was
/// up (or before), reaches the relayer without the pump idling on the way. From the later of
/// the client's write and the opening of that session's stream until the request's first POST,
/// the relayer never goes longer than one POST's round trip (connect included) without a POST
/// from the bridge: whatever was ahead of the request (the session's `initialize`, earlier
/// messages) went one after the other. A pump that stops after initializing a session, or waits
/// for the client's next line, leaves the request unsent while the session sits idle; the
/// client gets its answer late, or at its deadline as an error.
pub fn requests_posted_promptly(facts: &Facts<'_>) -> Vec<Violation> {
    let gap_ms = 2 * facts.slack_ms + CONNECT_MS;
    let mut found = Vec::new();
    for (n, (request, story)) in facts.requests.iter().zip(&facts.stories.of).enumerate() {
        let Some(first) = story.posts.first() else { continue };
        if !request.judged() {
            continue;
        }
        let Some(stream) = facts.stories.stream(&first.session) else { continue };
        // The session is up for the bridge once the stream's opening bytes (the endpoint) reach
        // it: a held link or a stall keeps them back (relay hunt seed 2026,
        // v1.relay.none.a2806e6a5e644c16: a hold from 651 to 1 151 ms kept the endpoint of a
        // stream opened at 700 ms).
        let start = request.at_ms.max(facts.stories.released_ms(&first.session, stream.opened_ms, facts.slack_ms));
        let mut last = start;
        let mut held = true;
        let between = facts.stories.all_posts.iter().map(|p| p.1).filter(|at| *at > start && *at < first.at_ms);
        for at in between.chain([first.at_ms]) {
            // A held link carries no POST: a gap it spans, to within a round trip, is its own
            // (relay hunt seed 2026, v1.relay.none.a2806e6a5e644c16: a hold from 2 387 to
            // 3 774 ms kept the POST sent at 2 450 ms until 3 850 ms).
            let held_link = || facts.stories.link_held(last, at, gap_ms);
            if at.saturating_sub(last) > gap_ms && !held_link() {
                // A gap is excused only by what touched the request (a refusal or reset ahead
                // of it, a reconnect): a request posted promptly holds whatever faults were near.
                held = false;
                if let Some(mechanism) = facts.touched(n, Some(at)) {
                    verdicts::excused(mechanism);
                    break;
                }
                let detail = format!(
                    "{} id {} waited to be posted: the relayer received nothing from the bridge \
                     between {last} and {at} ms while session {} was up (written at {} ms, \
                     posted at {} ms)",
                    request.method,
                    request.id.as_deref().unwrap_or("?"),
                    first.session,
                    request.at_ms,
                    first.at_ms
                );
                found.push(facts.violation("requests_posted_promptly", first.index, detail));
                break;
            }
            last = at;
        }
        if held {
            verdicts::held();
        }
    }
    capped(found)
}
