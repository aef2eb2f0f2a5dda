//! The relay checker about POST retries, as the relayer sees them. A transient refusal (429,
//! 5xx, or a connection reset before the relayer served it: status 0 in its log) of a message is sent again, after the bridge's backoff, while its session lives and the
//! message is still wanted: a relayer shedding load never sees a retry storm, and a short
//! refusal never turns into a lost `initialize`, notification or call. A refusal for good (a
//! 4xx other than 404, which ends a session, and 429) is never retried.

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};

use super::checks::{error_text, Facts, CLOSE_OUT};
use super::outcome_checks::{CONNECT_MS, NEXT_SEND_MS, POST_RETRIES, RETRY_BASE_MS};
use super::story::{same_reply, Sent};
use crate::check::capped;
use crate::trace::Violation;
use crate::verdicts;

/// The wait before the retry that follows the `refusals`-th transient refusal in a row.
fn wait_ms(refusals: usize) -> u64 {
    RETRY_BASE_MS << (refusals - 1).min(20)
}

/// By when the retry owed after `streak` reaches the relayer: a backoff step after the refusal,
/// within the slack, unless a held link met it. A hold delivers what it held when it ends, so a
/// retry it met arrives a connect after the hold's end: late, not lost. (A restart is no
/// excuse here: the relayer forgets its sessions, so the session ends at the kill, and
/// `post_retries` names that.)
fn retry_due(facts: &Facts<'_>, streak: &Streak) -> u64 {
    let from = streak.at_ms + wait_ms(streak.refusals);
    let mut due = from + facts.slack_ms;
    // A hold that began before the retry arrived delivers it at the hold's end.
    while let Some(held) = facts.stories.global_faults.iter().filter(|(name, start, end)| name == "link_hold" && *start <= due && *end >= from && end + CONNECT_MS + facts.slack_ms > due).map(|(_, _, end)| end + CONNECT_MS + facts.slack_ms).max() {
        due = held;
    }
    due
}

/// One message as the relayer logs its POST: `(id, method, note)`. The note is the step a
/// client's notification carries in its `_meta` (empty for requests and the bridge's own
/// messages, which the id and method name), so two notifications of one method, neither with
/// an id, are told apart; without a stamp, the method alone names a notification.
type Message<'a> = (&'a str, &'a str, String);

/// A message's name in a violation: `tools/call "relay-1"`, `notifications/cancelled (step 8)`.
fn label((id, method, note): &Message<'_>) -> String {
    match (*id, note.as_str()) {
        ("", "") => method.to_string(),
        ("", note) => format!("{method} (step {note})"),
        (id, _) => format!("{method} {id}"),
    }
}

/// A run of transient refusals of one message on one session.
struct Streak {
    refusals: usize,
    /// The last refusal: its POST's event index, time and status.
    index: usize,
    at_ms: u64,
    status: u64,
}

/// Per message (session, id, method, and for a client's notification the step it stamps in its
/// `_meta`, which the relayer logs as `note`: two notifications of one method are two messages)
/// as the relayer received it: after the `k`-th transient refusal in a row (k ≤ `POST_RETRIES`)
/// the next POST of that message comes no sooner than `250·2^(k-1)` ms later (after the last
/// retry failed too, the send is over, and the message goes again no sooner than the next step,
/// `250·2^POST_RETRIES` ms, unless the client wrote meanwhile), and it does come, unless the session ended (the relayer closed it or
/// the bridge opened another), the client already read the request's answer or closed stdin,
/// or the run ended first. A message refused for good (401, 403, any 4xx but 404 and 429) is
/// not retried: the next POST on its session sooner than the backoff's next step is not that
/// message again (the bridge's own `initialize` as much as a client's call), unless the client
/// wrote something meanwhile (which needs the session initialized anew: no retry).
pub fn post_retries(facts: &Facts<'_>) -> Vec<Violation> {
    let stories = &facts.stories;
    let mut found = Vec::new();
    let mut streaks: BTreeMap<(&str, Message<'_>), Streak> = BTreeMap::new();
    // Per session, the last POST: `(message, at, status, index)`.
    let mut last_on: BTreeMap<&str, (Message<'_>, u64, u64, usize)> = BTreeMap::new();
    let client_writes: Vec<u64> = facts
        .trace
        .events
        .iter()
        .filter(|e| e.host == host::CLIENT && e.kind == kind::MCP_SEND)
        .map(|e| e.at_ms)
        .collect();
    for (index, at_ms, session, id, method, status) in &stories.all_posts {
        // A notification is told apart from the next one of its method by the client's step: a
        // POST of another notification after one refused for good is no retry of it.
        let message: Message<'_> = (id.as_str(), method.as_str(), facts.trace.events[*index].text("note"));
        let name = label(&message);
        let previous = last_on.insert(session.as_str(), (message.clone(), *at_ms, *status, *index));
        if let Some((last, refused_ms, refused, refused_index)) = previous {
            // A reset connection hid the refusal: the bridge read a network error, and retries.
            let read = !stories.reset_after_admit.contains(&refused_index);
            let for_good = read && (400..=499).contains(&refused) && !matches!(refused, 404 | 429);
            let again = last == message;
            let asked_anew = client_writes.iter().any(|w| w + facts.slack_ms >= refused_ms && w <= at_ms);
            // A message refused for good goes again only as a new send, as one whose retries are
            // spent does: no sooner than the backoff's next step (`250·2^POST_RETRIES`). Until this
            // round the bound was the retry schedule plus the slack (1 150 ms at a 400 ms slack),
            // which the bridge's own try-again of a refused handshake a step after reading the
            // refusal met at its edge (relay hunt seed 0x20261207, v1.relay.none.39fb4f64cb71878c:
            // refused 3 750 ms, again at 4 900 ms); at a 10 ms slack it was 760 ms, short of the
            // step.
            if for_good && again && !asked_anew && at_ms - refused_ms < NEXT_SEND_MS {
                let detail = format!(
                    "{name} was retried at {at_ms} ms, after the relayer refused it for good (HTTP {refused}) at {refused_ms} ms"
                );
                found.push(facts.violation("post_retries", *index, detail));
            }
        }
        let key = (session.as_str(), message);
        let previous = streaks.remove(&key);
        // Past its retries, a message goes again on the next step of the backoff, or sooner
        // only because the client wrote meanwhile (which asks for the session anew).
        let spent = previous.as_ref().is_some_and(|streak| streak.refusals > POST_RETRIES);
        let asked_anew = previous.as_ref().is_some_and(|streak| client_writes.iter().any(|w| w + facts.slack_ms >= streak.at_ms && *w <= *at_ms));
        if let Some(streak) = previous.as_ref().filter(|_| !(spent && asked_anew)) {
            let (waited, wait) = (at_ms - streak.at_ms, wait_ms(streak.refusals));
            if waited < wait {
                let detail = format!(
                    "{name} reached the relayer again {waited} ms after it refused that message {} (refusal {} in a row); the backoff is {wait} ms",
                    streak.status, streak.refusals
                );
                found.push(facts.violation("post_retries", *index, detail));
            } else {
                verdicts::held();
            }
        }
        // A connection reset after the relayer answered: the bridge read a network error.
        let status = if stories.reset_after_admit.contains(index) { &0 } else { status };
        if !matches!(status, 0 | 429 | 500..=599) {
            continue;
        }
        let refusals = previous.filter(|_| !spent).map_or(1, |s| s.refusals + 1);
        // Past the retries the send is over; a later POST of the message is a new send, no
        // sooner than the backoff's next step.
        if refusals <= POST_RETRIES + 1 {
            streaks.insert(key, Streak { refusals, index: *index, at_ms: *at_ms, status: *status });
        }
    }
    let owner: BTreeMap<usize, usize> = stories
        .of
        .iter()
        .enumerate()
        .flat_map(|(n, story)| story.posts.iter().map(move |post| (post.index, n)))
        .collect();
    let eof = stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    // A send whose retries are spent is owed no further POST here (the bridge answers or keeps
    // the message, which other oracles judge).
    for ((session, message), streak) in streaks.into_iter().filter(|(_, streak)| streak.refusals <= POST_RETRIES) {
        let due = retry_due(facts, &streak);
        let session_ended = stories.streams.iter().any(|stream| {
            (stream.session == session && stream.closed_ms.is_some_and(|closed| closed <= due))
                || (stream.session != session && stream.opened_ms > streak.at_ms && stream.opened_ms <= due)
        });
        // An answer ends the send, unless it is the bridge giving up on this very refusal with
        // retries left (a rejection naming its status).
        let named = format!("HTTP {}", streak.status);
        let answered = owner
            .get(&streak.index)
            .and_then(|&n| facts.requests[n].answered.as_ref())
            .is_some_and(|answer| answer.at_ms <= due && !error_text(&answer.msg).is_some_and(|t| t.contains(&named)));
        if due > facts.horizon_ms {
            continue;
        }
        if answered {
            verdicts::held();
            continue;
        }
        if session_ended || eof <= due {
            verdicts::excused(if session_ended {
                "the refused POST's session ended before its retry was due"
            } else {
                "the client closed stdin before the retry was due"
            });
            continue;
        }
        let detail = format!(
            "{} was refused {} on session {session} with {} retries left, and never POSTed again (due by {due} ms)",
            label(&message),
            streak.status,
            POST_RETRIES + 1 - streak.refusals
        );
        found.push(facts.violation("post_retries", streak.index, detail));
    }
    found.sort_by_key(|v| v.at_ms);
    capped(found)
}

/// A request the relayer refused unserved because its session was not initialized
/// (`rpc.refused`) is sent again, after a new `initialize`, before the client reads its answer:
/// it is never left to be closed out at its deadline, nor left waiting while stdin stays open,
/// nor answered with the refusal itself (the server's truth, so `user_outcomes` holds it; but
/// the bridge promised a handshake and a resend, and the user's call did not run).
/// Read from the relayer's log (the refusal, the later POSTs of the request) and the client's
/// stdio (its answer, stdin's end).
///
/// One excuse, by its mechanism: a window of refused POSTs (`post_reject`, `post_reset`) that
/// refused the bridge's new handshake (its `initialize` or `notifications/initialized`, as the
/// relayer logged them) and lasted until the request's deadline was near. The request may go
/// only on an initialized session, and no handshake could complete before the close-out (soak
/// token v1.relay.none.74f376fe355cd9e2: a 500 window from 4650 to 5650 ms refused the new
/// session's `initialized` three times; the call's deadline was 5434 ms). A bridge that stops
/// trying the handshake while POSTs would be accepted has no excuse.
pub fn refused_requests_resent(facts: &Facts<'_>) -> Vec<Violation> {
    let eof = facts.stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        let story = &facts.stories.of[n];
        let Some(Sent { index: refused, at_ms: refused_ms, session, msg: refusal, .. }) = story.refusals.last().filter(|_| request.judged()) else { continue };
        if story.posts.iter().any(|p| p.index > *refused) {
            verdicts::held();
            continue;
        }
        let answer = request.answered.as_ref();
        let forwarded = answer.is_some_and(|a| same_reply(&a.msg, refusal));
        // The bridge learns of the refusal when its reply leaves the stream (a stall or hold may
        // keep it back), and needs a round trip to send again.
        let told = facts.stories.released_ms(session, *refused_ms, facts.slack_ms) + 2 * facts.slack_ms;
        if !forwarded && answer.is_some_and(|a| a.at_ms <= told) {
            verdicts::held();
            continue;
        }
        // A close-out while no session was up is no missed resend (`truthful_endings` holds the
        // claim to the relayer's streams).
        let closed_out = answer.is_some_and(|a| error_text(&a.msg).is_some_and(|t| t.contains(CLOSE_OUT) && !t.contains("stream was down")));
        let waiting = answer.is_none() && eof > facts.horizon_ms;
        let at_eof = answer.is_some_and(|a| a.at_ms + facts.slack_ms >= eof);
        if !forwarded && (!(closed_out || waiting) || at_eof) {
            continue;
        }
        if let Some(answer) = answer.filter(|_| closed_out) {
            let deadline = request.at_ms + facts.call_timeout_ms;
            if let Some(window) = handshake_refused_through(facts, *refused_ms, deadline.min(answer.at_ms)) {
                verdicts::excused(window);
                continue;
            }
        }
        let ending = match answer {
            Some(a) if forwarded => format!("the client was answered with the refusal itself at {} ms", a.at_ms),
            Some(a) => format!("was closed out at {} ms", a.at_ms),
            None => "was never answered".to_string(),
        };
        let detail = format!(
            "{} id {}: the relayer refused it at {} ms because its session was not initialized; it was never sent again and {ending}",
            request.method,
            request.id.as_deref().unwrap_or(""),
            refused_ms
        );
        found.push(facts.violation("refused_requests_resent", *refused, detail));
    }
    capped(found)
}

/// The refusal window, if any, that refused a handshake POST of the bridge's after `from` and
/// lasted until a round trip before `until`: no session could be initialized for the request
/// in time.
fn handshake_refused_through(facts: &Facts<'_>, from: u64, until: u64) -> Option<&'static str> {
    let round_trip = 2 * facts.slack_ms;
    facts.stories.refusal_windows.iter().find_map(|(name, start, end)| {
        let covers = *start <= until && end + round_trip >= until;
        let refused_handshake = facts.stories.all_posts.iter().any(|(index, at, _, _, method, _)| {
            let cause = facts.trace.events[*index].text("cause");
            (method == "initialize" || method == "notifications/initialized")
                && (cause == "fault" || cause == "reset")
                && from.max(*start) <= *at
                && *at <= *end
        });
        (covers && refused_handshake).then_some(if name == "post_reject" {
            "a post_reject window refused the new session's handshake until the deadline"
        } else {
            "a post_reset window reset the new session's handshake until the deadline"
        })
    })
}
