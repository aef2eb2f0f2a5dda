//! One story per client request, built from observations the bridge cannot fake: what the client
//! wrote and read on stdio, and what the relayer received (each POST with its session, status
//! and key), executed, sent back on which session or lost, and which streams it served and how
//! long they lived. The checkers in `outcome_checks.rs` judge these stories; the bridge's own
//! events only explain a violation.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client::note_step;
use bridge_under_test::relay::relayer::NOT_INITIALIZED;
use serde_json::Value;

use super::checks::Facts;
use crate::check::message;
use crate::trace::TraceEvent;

/// A stream as the relayer served it.
#[derive(Debug, Clone)]
pub struct Stream {
    pub session: String,
    /// The stream's name within its session (`get-2`, `post-7`; empty on HTTP+SSE, whose session
    /// has one stream). A connection that resumes a stream keeps its name.
    pub label: String,
    pub opened_ms: u64,
    /// When the relayer stopped serving it (its `stream.close`, or a restart); `None`: still open.
    pub closed_ms: Option<u64>,
    /// The client (the bridge) closed the connection, not the relayer.
    pub closed_by_client: bool,
    /// The relayer ended it once everything it brought was written (a POST's stream after its
    /// response): no fault cut it, so every frame written before the end is delivered.
    pub completed: bool,
    /// A `stream_flap` dropped it as it opened, before a byte of it was written, so its peer
    /// holds no event id to resume it from: the sdk_rmcp server drops a stream opened during a
    /// flap before reading anything rmcp wrote (`bridge-under-test/src/sdk/server.rs`,
    /// `relay_stream`, style `rmcp`); the mock writes a stream's opening first (a priming event
    /// with an id, from protocol 2025-11-25) unless the flap says `after_endpoint: false`
    /// (`bridge-under-test/src/relay/relayer/writer.rs`).
    pub dropped_unwritten: bool,
    /// The wire form it wrote (`stream.open`'s `style`).
    pub style: String,
}

impl Stream {
    /// When the relayer cut it: closed neither by the client nor because all it brought was
    /// written.
    pub fn cut_ms(&self) -> Option<u64> {
        self.closed_ms.filter(|_| !self.completed && !self.closed_by_client)
    }
}

/// A window in which bytes on the streams were held back (a stall or a link hold): `(start,
/// end, only streams opened before start)`.
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    pub start_ms: u64,
    pub end_ms: u64,
    pub older_streams_only: bool,
}

/// A reply the relayer wrote to a session's stream.
#[derive(Debug, Clone)]
pub struct Sent {
    pub index: usize,
    pub at_ms: u64,
    pub session: String,
    /// The stream it was written to (its `Stream::label`; a JSON body's `json-N` names none).
    pub stream: String,
    pub msg: Value,
}

/// A POST as the relayer received it.
#[derive(Debug, Clone)]
pub struct Post {
    pub index: usize,
    pub at_ms: u64,
    pub session: String,
    pub status: u64,
    /// The connection was reset before the answer reached the bridge (fault `post_reset`): the
    /// bridge read a network error, whatever `status` the relayer gave.
    pub reset: bool,
}

/// What the relayer did for one client request.
#[derive(Debug, Clone, Default)]
pub struct Story {
    /// The user action a `tools/call` names (empty otherwise).
    pub action: String,
    pub posts: Vec<Post>,
    /// Real executions (`tool.exec`), by time.
    pub execs: Vec<(usize, u64)>,
    /// When the tool finished (`tool.done`), if it did.
    pub done_ms: Option<u64>,
    pub sent: Vec<Sent>,
    /// Mock faults that fired on this request (`fault.fired`).
    pub fired: Vec<String>,
    /// The streams the relayer answered its POSTs with (Streamable HTTP's `post-N`), as indices
    /// into `Stories::streams`.
    pub post_streams: Vec<usize>,
    /// The relayer's refusals of it, unserved after accepting its POST (the session was not
    /// initialized), as the replies it wrote to say so (each `reply.sent`). Nothing ran for
    /// those POSTs. A bridge that forwards one tells its client the server's truth.
    pub refusals: Vec<Sent>,
}

/// Everything the relayer observed, and the stories of the client's requests.
#[derive(Debug, Default)]
pub struct Stories {
    /// Parallel to `Facts::requests`.
    pub of: Vec<Story>,
    pub streams: Vec<Stream>,
    /// When the relayer restarted (each `relayer.start` after its first), and when the bridge
    /// was first told a session was gone after it (a 404 of a POST or a GET; `u64::MAX`: never).
    pub restarts: Vec<(u64, u64)>,
    pub holds: Vec<Hold>,
    /// Windowed and instant faults that act on every request: `(name, start, end)`.
    pub global_faults: Vec<(String, u64, u64)>,
    /// Windows in which the relayer refused or reset POSTs (`post_reject`, `post_reset`):
    /// `(name, start, end)`.
    pub refusal_windows: Vec<(String, u64, u64)>,
    /// The heal phase, if the run reached it.
    pub heal_ms: Option<u64>,
    /// When the client closed stdin, and why (`end` or `fault`).
    pub client_eof: Option<(usize, u64, String)>,
    /// Every POST the relayer received: `(index, at, session, id, method, status)`.
    pub all_posts: Vec<(usize, u64, String, String, String, u64)>,
    /// The POSTs (by event index) the relayer admitted whose connection was then reset (fault
    /// `post_reset` after admission): the bridge never read their answer.
    pub reset_after_admit: BTreeSet<usize>,
    /// When a fault destroyed the answer to a session's `initialize` (swallowed or withheld):
    /// the requests waiting for that session wait for the bridge's next handshake.
    pub handshake_lost: Vec<u64>,
    /// When a fault held the answer to a session's `initialize` back (`late_reply`): the
    /// session's handshake, and what waits behind it, ends only when the answer comes.
    pub handshake_late: Vec<u64>,
}

/// The client request each upstream id the relayer saw stands for, as the POST that carried it
/// says. An id is one session's: a bridge that numbers anew on each session (rmcp: a new
/// session is a new service and starts again from 0) sends another request under an id an
/// earlier session used (sdk hunt seed 2026, `v1.sdk.none.687a9baebcbfe3ef`: a list's reply on
/// the second session was taken for a call's of the first). An event without a session (a
/// tool's end) names the id's latest POST.
#[derive(Default)]
struct Carried {
    by_session: BTreeMap<(String, String), usize>,
    latest: BTreeMap<String, usize>,
}

impl Carried {
    fn get(&self, event: &TraceEvent) -> Option<usize> {
        let (session, id) = (event.text("session"), event.text("id"));
        if session.is_empty() {
            self.earlier(&id)
        } else {
            self.by_session.get(&(session, id)).copied()
        }
    }

    /// The request the latest POST of upstream id `id` carried, on whichever session.
    fn earlier(&self, id: &str) -> Option<usize> {
        self.latest.get(id).copied()
    }

    fn insert(&mut self, post: &TraceEvent, n: usize) {
        let (session, id) = (post.text("session"), post.text("id"));
        self.latest.insert(id.clone(), n);
        self.by_session.insert((session, id), n);
    }
}

/// The status of an `http.post` as the checkers read it: any 2xx is an acceptance (202). The
/// relay API and HTTP+SSE accept with 202 and answer on the stream; Streamable HTTP answers a
/// request with 200 (its reply, as JSON or a stream of its own), a notification with 202.
pub fn post_status(event: &TraceEvent) -> u64 {
    match event.num("status") {
        200..=299 => 202,
        status => status,
    }
}

/// A client's write that is a `notifications/cancelled`: the message, and the request id it
/// names (canonical).
pub fn cancellation(event: &TraceEvent) -> Option<(Value, String)> {
    let msg = message(event);
    if msg.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let id = msg.pointer("/params/requestId").map(Value::to_string)?;
    Some((msg, id))
}

/// The upstream id each client request's forwarded cancellation named, by request: `(session,
/// upstream id)`. The client stamps each cancellation with its step (`_meta`), the relayer logs
/// the step with the POST that carried it, and `rpc.cancel` (logged in that POST's handler) the
/// id it named. Which request a cancellation is of, `Facts::cancelled` says.
fn forwarded_cancels(facts: &Facts<'_>) -> BTreeMap<usize, (String, String)> {
    let mut of_step: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_post: Option<(String, String)> = None;
    let mut named = BTreeMap::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        match (event.host.as_str(), event.kind.as_str()) {
            (host::CLIENT, kind::MCP_SEND) => {
                let (Some(&n), Some((msg, _))) = (facts.cancelled.get(&index), cancellation(event)) else { continue };
                of_step.extend(note_step(&msg).map(|step| (step.to_string(), n)));
            }
            (host::RELAYER, kind::HTTP_POST) => last_post = Some((event.text("session"), event.text("note"))),
            (host::RELAYER, kind::RPC_CANCEL) => {
                let session = event.text("session");
                let step = last_post.as_ref().filter(|(s, note)| *s == session && !note.is_empty()).map(|(_, note)| note);
                if let Some(&n) = step.and_then(|step| of_step.get(step)) {
                    named.entry(n).or_insert((session, event.text("request")));
                }
            }
            _ => {}
        }
    }
    named
}

/// Faults that act on every request in flight rather than on one step.
const GLOBAL_FAULTS: &[&str] = &["withhold_replies", "stream_stall", "stream_eof", "stream_flap", "relayer_bounce", "link_hold", "stdin_eof", "post_reset"];

impl Stories {
    pub fn new(facts: &Facts<'_>) -> Self {
        let mut stories = Stories { of: vec![Story::default(); facts.requests.len()], ..Stories::default() };
        let actions: Vec<String> = facts.requests.iter().map(|r| action_of(&message(&facts.trace.events[r.index]))).collect();
        for (story, action) in stories.of.iter_mut().zip(&actions) {
            story.action = action.clone();
        }
        let mut by_action: BTreeMap<&str, usize> = BTreeMap::new();
        for (n, action) in actions.iter().enumerate() {
            if !action.is_empty() {
                by_action.insert(action.as_str(), n);
            }
        }
        // Requests of each id in the order the client sent them: an event for an id belongs to
        // the latest request of that id sent before it.
        let mut by_id: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        // Lines answered with a local error (invalid ones, an id sent twice) never reach the
        // relayer as the client's request: no relayer event belongs to them.
        for (n, request) in facts.requests.iter().enumerate() {
            if let Some(id) = request.id.as_ref().filter(|_| !request.method.is_empty() && !request.dup) {
                if actions[n].is_empty() {
                    by_id.entry(id.as_str()).or_default().push(n);
                }
            }
        }
        // An event for a request the relayer knows by the id it carried: the POST that brought
        // that id names the client's request (by client id and method).
        let mut carried = Carried::default();
        let stamps_passed = facts.trace.of_kind(kind::HTTP_POST).any(|(_, e)| !e.text("id").is_empty() && !e.text("client_id").is_empty());
        let owner = |event: &TraceEvent, method: Option<&str>| -> Option<usize> {
            let action = event.text("action");
            if !action.is_empty() {
                return by_action.get(action.as_str()).copied();
            }
            // The client's id the request stood for: the relayer logs the one the client stamped
            // in the request's `_meta` (a bridge that forwards a request keeps it, under whatever
            // id it sends it). A request without the stamp is the bridge's own where the bridge
            // passes stamps (mcp-proxy's SDK lists tools itself after a call, and its upstream id
            // 3 was taken for the client's tools/list 3, live.v1.relay.none.f24f0a6bca9aeb6d);
            // from a bridge that drops every `_meta`, the id it carried is the client's.
            let id = match event.text("client_id") {
                client if !client.is_empty() => client,
                _ if stamps_passed => return None,
                _ => event.text("id"),
            };
            let candidates = by_id.get(id.as_str())?;
            // The latest sent before the event; one sent up to a slack later only if none was
            // (the client's clock may read a tick behind the relayer's).
            let fits = |n: &&usize| method.is_none_or(|m| facts.requests[**n].method == m);
            let before = |slack: u64| candidates.iter().rev().filter(fits).find(|n| facts.requests[**n].at_ms <= event.at_ms + slack).copied();
            before(0).or_else(|| before(facts.slack_ms))
        };
        // An event that names its action belongs to that action's request: the id it carried
        // may have been reused in flight, so the latest POST of that id can be another request's
        // (mcp-remote, live.v1.relay.none.816a060de28e1359).
        let owner_of = |carried: &Carried, event: &TraceEvent| -> Option<usize> {
            let action = event.text("action");
            let by_own_action = by_action.get(action.as_str()).copied().filter(|_| !action.is_empty());
            by_own_action.or_else(|| carried.get(event)).or_else(|| owner(event, None))
        };
        let cancels = forwarded_cancels(facts);
        let mut claimed: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
        // The POSTs of this instant that a request's story took: (their time, session, upstream
        // id, the request). A POST answered with a stream opens it in the same instant, and the
        // stream's `ids` name the POST's requests: several POSTs may come in one instant (sdk_rmcp,
        // v1.sdk_rmcp.none.f5d255e614d86abf: a ping's and a call's, their streams dropped by one
        // flap).
        let mut carried_now: Vec<(u64, String, String, usize)> = Vec::new();
        // Whether the relayer has started once: each later start is a restart.
        let mut booted = false;
        // When the latest `relayer_bounce` killed the relayer: its restart's moment. In the sim
        // the new relayer starts in that instant; a live relayer takes a while to listen again
        // (mcp-proxy, live.v1.relay.none.2438853e10632ed0: killed at 2 809 ms, started at
        // 3 011 ms), and its connections died at the kill.
        let mut killed_ms: Option<u64> = None;
        // The connection serving each stream now, by (session, stream name).
        let mut open: BTreeMap<(String, String), usize> = BTreeMap::new();
        // Windowed faults by their detail (two faults of one kind may overlap): (name, start).
        let mut starts: BTreeMap<String, (String, u64)> = BTreeMap::new();
        // The stream flaps in force, by detail: whether each writes a stream's opening first.
        let mut flaps: BTreeMap<String, bool> = BTreeMap::new();
        for (index, event) in facts.trace.events.iter().enumerate() {
            match (event.host.as_str(), event.kind.as_str()) {
                (host::CLIENT, kind::CLIENT_EOF) => {
                    stories.client_eof.get_or_insert((index, event.at_ms, event.text("reason")));
                }
                (host::SIM, kind::FAULT_INJECTED) => {
                    let fault = event.text("fault");
                    if fault == "heal" {
                        stories.heal_ms = Some(event.at_ms);
                        for (_, (name, start)) in std::mem::take(&mut starts) {
                            stories.end_fault(&name, start, event.at_ms);
                        }
                        flaps.clear();
                    } else if event.text("phase") == "start" {
                        if fault == "relayer_bounce" {
                            killed_ms = Some(event.at_ms);
                        }
                        let windowed = matches!(fault.as_str(), "withhold_replies" | "stream_stall" | "link_hold" | "stream_flap" | "post_reject" | "post_reset");
                        if fault == "stream_flap" {
                            let writes = serde_json::from_str::<Value>(&event.text("detail")).ok().and_then(|d| d.get("after_endpoint")?.as_bool()).unwrap_or(true);
                            flaps.insert(event.text("detail"), writes);
                        }
                        if windowed {
                            starts.insert(event.text("detail"), (fault, event.at_ms));
                        } else {
                            stories.end_fault(&fault, event.at_ms, event.at_ms);
                        }
                    } else if let Some((_, start)) = starts.remove(&event.text("detail")) {
                        flaps.remove(&event.text("detail"));
                        stories.end_fault(&fault, start, event.at_ms);
                    }
                }
                (host::RELAYER, kind::RELAYER_START) => {
                    let at = killed_ms.take().unwrap_or(event.at_ms);
                    if booted {
                        stories.restarts.push((at, u64::MAX));
                    }
                    booted = true;
                    for (_, stream) in std::mem::take(&mut open) {
                        stories.streams[stream].closed_ms = Some(at);
                    }
                }
                (host::RELAYER, kind::STREAM_OPEN) => {
                    let (session, label) = (event.text("session"), event.text("stream"));
                    open.insert((session.clone(), label.clone()), stories.streams.len());
                    // A POST answered with a stream opens it in the same instant, on its session;
                    // a trace without `ids` (recorded before the field) pairs it with the last.
                    let ids = event.get("ids").map(|_| serde_json::from_str::<Vec<Value>>(&event.text("ids")).unwrap_or_default());
                    let ids: Option<Vec<String>> = ids.map(|ids| ids.iter().map(Value::to_string).collect());
                    let mut now = carried_now.iter().filter(|(at, s, _, _)| label.starts_with("post-") && *at == event.at_ms && *s == session);
                    let owners: Vec<usize> = match &ids {
                        Some(ids) => now.filter(|(_, _, id, _)| ids.contains(id)).map(|c| c.3).collect(),
                        None => now.next_back().map(|c| c.3).into_iter().collect(),
                    };
                    for n in owners {
                        stories.of[n].post_streams.push(stories.streams.len());
                    }
                    let style = event.text("style");
                    stories.streams.push(Stream { session, label, opened_ms: event.at_ms, closed_ms: None, closed_by_client: false, completed: false, dropped_unwritten: false, style });
                }
                (host::RELAYER, kind::STREAM_CLOSE) => {
                    if let Some(stream) = open.remove(&(event.text("session"), event.text("stream"))) {
                        stories.streams[stream].closed_ms = Some(event.at_ms);
                        stories.streams[stream].closed_by_client = event.text("by") == "client";
                        stories.streams[stream].completed = event.text("by") == "complete";
                    }
                }
                (host::RELAYER, kind::STREAM_REFUSED) if event.text("cause") == "gone" => stories.told_gone(event.at_ms),
                (host::RELAYER, kind::HTTP_POST) => {
                    let (session, status) = (event.text("session"), post_status(event));
                    if event.text("cause") == "gone" {
                        stories.told_gone(event.at_ms);
                    }
                    stories.all_posts.push((index, event.at_ms, session.clone(), event.text("id"), event.text("method"), status));
                    carried_now.retain(|(at, _, _, _)| *at == event.at_ms);
                    if event.text("id").is_empty() {
                        continue;
                    }
                    // A bridge that rewrites ids sends each admission under a new upstream id,
                    // in the client's order: the first POST of an upstream id belongs to the
                    // earliest request of that client id and method no upstream id has claimed
                    // (two requests may reuse one id within a tick); its retries and replays
                    // carry the same upstream id.
                    let (upstream, client, method) = (event.text("id"), event.text("client_id"), event.text("method"));
                    let rewritten = !client.is_empty() && client != upstream && event.text("action").is_empty();
                    // Of those, one the client still waits for comes first: a request closed out
                    // before any POST of it (say, while the stream was down) is not what a later
                    // request reusing its id sends. One still unanswered at the POST comes before
                    // one answered within a slack of it (a POST in flight at a close-out reaches
                    // the relayer after the client read the close-out): a ping closed out unsent
                    // at 8000 ms is not the ping of that id the client sent again at 8000 ms and
                    // the relayer received at 8300 ms (soak token v1.relay.none.75d5a14eba2f9d63).
                    // A closed-out request is passed over only if some request of that id and
                    // method will never be POSTed: when as many new upstream ids are still to
                    // come as there are requests unclaimed, each gets one, in the client's order,
                    // and the POST in hand is the closed-out one's, in flight at its close-out
                    // (v1.relay.none.36f61a81eb719fec: its second POST, under another upstream
                    // id, was the new request's).
                    let fifo = || {
                        let candidates = by_id.get(client.as_str())?;
                        let of_key = |n: &usize| !claimed.contains(n) && facts.requests[*n].method == method;
                        let written = |n: &usize| facts.requests[*n].method == method && facts.requests[*n].at_ms <= event.at_ms + facts.slack_ms;
                        // A request whose cancellation the bridge passed on naming another
                        // upstream id on this session was sent as that id, if at all: this POST
                        // is not it (sdk soak v1.sdk.none.8b3e93d2cd45e1cf: tools/list 9
                        // cancelled as upstream 5 while a link hold kept its POST; the list the
                        // client wrote again under id 9 was upstream 6).
                        // A cancellation passed on under the client's own id names no upstream
                        // id (a bridge's error `cancellations_name_their_request` judges): it
                        // tells nothing here.
                        let sent_as_other = |n: &usize| {
                            let own = facts.requests[*n].id.as_deref();
                            cancels.get(n).is_some_and(|(s, named)| *s == session && *named != upstream && Some(named.as_str()) != own)
                        };
                        let unclaimed = |n: &usize| !claimed.contains(n) && written(n) && !sent_as_other(n);
                        let waiting = |n: usize, slack: u64| facts.requests[n].answered.as_ref().is_none_or(|a| a.at_ms + slack >= event.at_ms);
                        let first = |slack: u64| candidates.iter().copied().find(|n| unclaimed(n) && waiting(*n, slack));
                        let oldest = candidates.iter().copied().find(unclaimed);
                        let to_come = || {
                            let later = facts.trace.events[index + 1..].iter().filter(|later| {
                                later.host == host::RELAYER
                                    && later.kind == kind::HTTP_POST
                                    && later.text("client_id") == client
                                    && later.text("method") == method
                                    && later.text("action").is_empty()
                                    && later.text("id") != upstream
                                    && carried.earlier(&later.text("id")).is_none()
                            });
                            later.map(|later| later.text("id")).collect::<BTreeSet<_>>().len()
                        };
                        let skippable = || candidates.iter().filter(|n| of_key(n)).count() > to_come() + 1;
                        // A bridge that sends a request anew on a new session numbers it anew
                        // there (the sdk bridge, after a 404: rmcp numbers each session from 0):
                        // one still waiting, carried so far only on other sessions, is the one.
                        let elsewhere = |n: &usize| stories.of[*n].posts.iter().all(|post| post.session != session);
                        let resent = || candidates.iter().rev().copied().find(|n| written(n) && waiting(*n, 0) && elsewhere(n));
                        let pick = match first(0).or_else(|| first(facts.slack_ms)) {
                            Some(waiting) if Some(waiting) != oldest && !skippable() => oldest,
                            waiting => waiting.or(oldest).or_else(resent),
                        };
                        // One the client wrote only after this POST (within the slack) is not what
                        // it carries when one written before it still waits, carried so far only
                        // on other sessions (sdk soak v1.sdk.none.a512b07384b79855: tools/list 2
                        // met a 404 and was sent anew on the new session at 11 200 ms; the client
                        // reused id 2 at 11 273 ms, after reading the answer).
                        let before_post = |n: &usize| facts.requests[*n].at_ms <= event.at_ms;
                        let posted = |n: &usize| !stories.of[*n].posts.is_empty();
                        let sent_anew = || candidates.iter().rev().copied().find(|n| written(n) && before_post(n) && waiting(*n, 0) && posted(n) && elsewhere(n));
                        match pick {
                            Some(n) if !before_post(&n) => sent_anew().or(pick),
                            pick => pick,
                        }
                    };
                    // An id this session has not carried may be one an earlier session did, for the
                    // same request (the relay bridge replays a request under its upstream id) or
                    // for another (rmcp numbers each session from 0): the same client id and
                    // method tell which.
                    let same_request = |n: &usize| facts.requests[*n].method == method && facts.requests[*n].id.as_deref() == Some(client.as_str());
                    let known = carried.get(event).or_else(|| carried.earlier(&upstream).filter(same_request));
                    let found = match (rewritten, known) {
                        (true, Some(n)) => Some(n),
                        (true, None) => fifo(),
                        (false, _) => owner(event, Some(&method)),
                    };
                    if let Some(n) = found {
                        if facts.requests[n].method == method {
                            claimed.insert(n);
                            carried.insert(event, n);
                            carried_now.push((event.at_ms, session.clone(), event.text("id"), n));
                            stories.of[n].posts.push(Post { index, at_ms: event.at_ms, session, status, reset: false });
                        }
                    }
                }
                (host::RELAYER, kind::TOOL_EXEC) => {
                    if let Some(n) = owner_of(&carried, event) {
                        stories.of[n].execs.push((index, event.at_ms));
                    }
                }
                (host::RELAYER, kind::TOOL_DONE) => {
                    if let Some(n) = owner_of(&carried, event) {
                        stories.of[n].done_ms.get_or_insert(event.at_ms);
                    }
                }

                (host::RELAYER, kind::REPLY_SENT) => {
                    let Some(n) = owner_of(&carried, event) else { continue };
                    let msg = message(event);
                    let (session, stream) = (event.text("session"), event.text("stream"));
                    // A refusal before `initialize` is the relayer asking for the handshake, not
                    // an answer the bridge owes the client (it initializes and sends again).
                    if msg.pointer("/error/code").and_then(Value::as_i64) == Some(NOT_INITIALIZED) {
                        stories.of[n].refusals.push(Sent { index, at_ms: event.at_ms, session, stream, msg });
                        continue;
                    }
                    // The relayer's reply to the bridge's own `initialize` is not the answer to a
                    // client request that happens to share its id.
                    let init_reply = msg.pointer("/result/protocolVersion").is_some();
                    if init_reply != (facts.requests[n].method == "initialize") {
                        continue;
                    }
                    stories.of[n].sent.push(Sent { index, at_ms: event.at_ms, session, stream, msg });
                }
                (host::RELAYER, kind::FAULT_FIRED) => {
                    let fault = event.text("fault");
                    let (session, id) = (event.text("session"), event.text("id"));
                    let handshake = || stories.all_posts.iter().any(|(_, _, s, i, method, _)| method == "initialize" && *s == session && *i == id);
                    if matches!(fault.as_str(), "swallow_reply" | "withhold_replies") && handshake() {
                        stories.handshake_lost.push(event.at_ms);
                    }
                    if fault == "late_reply" && handshake() {
                        stories.handshake_late.push(event.at_ms);
                    }
                    // A post_reset fires in the same synchronous handler as the POST it cuts
                    // (after whatever serving it logged), so it cuts the relayer's last POST,
                    // which must name the same session and id: `(its index, whether it carried
                    // no method)`, the latter an answer to the server's own request.
                    let cut = stories
                        .all_posts
                        .last()
                        .filter(|(_, _, session, id, _, _)| *session == event.text("session") && *id == event.text("id"))
                        .map(|(post, _, _, _, method, _)| (*post, method.is_empty()));
                    if fault == "post_reset" {
                        stories.reset_after_admit.extend(cut.map(|(post, _)| post));
                    }
                    // A flap drops each stream of its session opened in that instant; unwritten
                    // when the relayer says it wrote no opening first (the flap knob holds the
                    // last flap to start: sdk seed 8, v1.sdk.none.15163bcfe1b301cc), or, in a
                    // trace without `opening`, when every flap in force writes nothing first.
                    if fault == "stream_flap" {
                        let inferred = || !flaps.is_empty() && flaps.values().all(|writes| !writes);
                        let silent = event.get("opening").map_or_else(inferred, |_| event.text("opening") == "false");
                        let mut dropped_post = false;
                        for stream in stories.streams.iter_mut().rev().take_while(|s| s.opened_ms == event.at_ms) {
                            let dropped = stream.session == session && (stream.style == "rmcp" || silent);
                            stream.dropped_unwritten |= dropped;
                            dropped_post |= dropped && stream.label.starts_with("post-");
                        }
                        // The stream answering the session's `initialize`: the handshake's
                        // answer is lost (rmcp's `serve` fails, "connection closed: initialize
                        // response", sdk v1.sdk.none.7050d04de4d31da2).
                        let handshake = stories.all_posts.iter().rev().take_while(|p| p.1 == event.at_ms).any(|p| p.2 == session && p.4 == "initialize");
                        if dropped_post && handshake {
                            stories.handshake_lost.push(event.at_ms);
                        }
                    }
                    // A reset of an answer's POST is no request's, whatever id the answer shares
                    // with one (v1.sdk_rmcp.none.92ecc825eb6119de: rmcp's answer to the server's
                    // ping 1 was not the client's tools/call 1).
                    let answer_cut = fault == "post_reset" && cut.is_some_and(|(_, answer)| answer);
                    if fault == "stream_eof" || fault == "stream_flap" || answer_cut {
                        continue;
                    }
                    if let Some(n) = owner_of(&carried, event) {
                        if fault == "post_reset" {
                            if let Some(post) = stories.of[n].posts.last_mut() {
                                post.reset = true;
                            }
                        }
                        stories.of[n].fired.push(fault);
                    }
                }
                _ => {}
            }
        }
        let end = facts.horizon_ms;
        for (_, (name, start)) in starts {
            stories.end_fault(&name, start, end);
        }
        stories
    }

    fn end_fault(&mut self, name: &str, start: u64, end: u64) {
        match name {
            "stream_stall" => self.holds.push(Hold { start_ms: start, end_ms: end, older_streams_only: true }),
            "link_hold" => self.holds.push(Hold { start_ms: start, end_ms: end, older_streams_only: false }),
            _ => {}
        }
        if GLOBAL_FAULTS.contains(&name) {
            self.global_faults.push((name.to_string(), start, end));
        }
        if matches!(name, "post_reject" | "post_reset") {
            self.refusal_windows.push((name.to_string(), start, end));
        }
    }

    /// The request whose story holds the POST at event `index`, if any (a reuse in flight, or a
    /// notification or handshake the bridge sent, has none).
    pub fn post_owner(&self, index: usize) -> Option<usize> {
        self.of.iter().position(|story| story.posts.iter().any(|p| p.index == index))
    }

    /// The stream that served `session` first (on HTTP+SSE, its only one).
    pub fn stream(&self, session: &str) -> Option<&Stream> {
        self.streams.iter().find(|s| s.session == session)
    }

    /// The connection that could carry a frame released at `at_ms` to stream `label` of
    /// `session` to the bridge before `until_ms` (the client left): the one open then, or one
    /// that resumed the stream later (the server replays its log to it), open `carry_ms` past the
    /// later of the two. `Some(None)`: every connection closed too soon. `None`: no stream of
    /// that name was served (a reply in a POST's JSON body).
    pub fn carrier(&self, session: &str, label: &str, at_ms: u64, carry_ms: u64, until_ms: u64) -> Option<Option<&Stream>> {
        let mut connections = self.streams.iter().filter(|s| s.session == session && s.label == label).peekable();
        connections.peek()?;
        // A connection the relayer completed carries what was released to it before the end
        // (live, `live.v1.relay.none.b460a250f07d4536`: a reply written as the last event of a
        // POST's stream, which the relayer closed in the same millisecond).
        Some(connections.find(|s| {
            let from = s.opened_ms.max(at_ms);
            from < until_ms && s.closed_ms.is_none_or(|closed| closed > from + carry_ms || (s.completed && closed >= from))
        }))
    }

    /// When a frame the relayer wrote at `at_ms` to `session` left for the bridge: at once, or
    /// when the stall or hold holding it back ended (one that began while it was in flight,
    /// within `slack_ms`, holds it too).
    pub fn released_ms(&self, session: &str, at_ms: u64, slack_ms: u64) -> u64 {
        self.released_from(self.stream(session).map_or(0, |s| s.opened_ms), at_ms, slack_ms)
    }

    /// [`Stories::released_ms`] for a reply, by the stream it was written to (a stall holds only
    /// the streams opened before it began).
    pub fn released(&self, sent: &Sent, slack_ms: u64) -> u64 {
        let own = self.streams.iter().rfind(|s| s.session == sent.session && s.label == sent.stream && s.opened_ms <= sent.at_ms);
        let opened = own.or_else(|| self.stream(&sent.session)).map_or(0, |s| s.opened_ms);
        self.released_from(opened, sent.at_ms, slack_ms)
    }

    /// Whether a reply left for the bridge before `by_ms`: released by then on a connection of its
    /// stream open at that moment (a JSON body, which names no stream, leaves with its POST).
    pub fn on_its_way(&self, sent: &Sent, slack_ms: u64, by_ms: u64) -> bool {
        let released = self.released(sent, slack_ms);
        let mut own = self.streams.iter().filter(|s| s.session == sent.session && s.label == sent.stream).peekable();
        let carried = own.peek().is_none() || own.any(|s| s.opened_ms <= released && s.closed_ms.is_none_or(|closed| closed > released));
        released < by_ms && carried
    }

    /// When a frame written at `at_ms` to a stream opened at `opened` left for the bridge.
    fn released_from(&self, opened: u64, at_ms: u64, slack_ms: u64) -> u64 {
        let mut t = at_ms;
        // Holds can chain: apply until nothing moves.
        loop {
            let moved = self
                .holds
                .iter()
                .filter(|h| h.start_ms <= t + slack_ms && t <= h.end_ms && (!h.older_streams_only || opened < h.start_ms))
                .map(|h| h.end_ms)
                .max();
            match moved {
                Some(end) if end > t => t = end,
                _ => return t,
            }
        }
    }

    /// Whether a held link (`link_hold`: nothing passes between the bridge and the relayer,
    /// either way) spanned `[from, to]`, to within `margin_ms` at each end.
    pub fn link_held(&self, from: u64, to: u64, margin_ms: u64) -> bool {
        let mut holds = self.global_faults.iter().filter(|(name, _, _)| name == "link_hold");
        holds.any(|(_, start, end)| *start <= from + margin_ms && to <= end + margin_ms)
    }

    /// Whether a stream the relayer served ended inside `[from, to]` (a disruption every request
    /// in flight then shares: a reconnect and a replay).
    pub fn stream_ended_in(&self, from: u64, to: u64) -> bool {
        self.streams.iter().any(|s| s.closed_ms.is_some_and(|c| from <= c && c <= to))
    }

    /// Whether the relayer had any stream open at `at_ms`.
    pub fn any_stream_open(&self, at_ms: u64) -> bool {
        self.streams.iter().any(|s| s.opened_ms <= at_ms && s.closed_ms.is_none_or(|c| c > at_ms))
    }

    /// The relayer refused a request of a session its last restart forgot: the bridge is told.
    fn told_gone(&mut self, at_ms: u64) {
        if let Some((_, told)) = self.restarts.last_mut() {
            *told = (*told).min(at_ms);
        }
    }

    /// Whether the relayer had no stream open at some moment of `[from, to]` after its first
    /// stream opened: the bridge had lost its session then and was reconnecting, so a request
    /// could not be carried. (Before the first stream the bridge owes a prompt connect: that
    /// wait excuses nothing.)
    pub fn no_stream_during(&self, from: u64, to: u64) -> bool {
        self.last_outage(from, to).is_some()
    }

    /// The last stretch with no stream open (as in [`Self::no_stream_during`]) that began by
    /// `to`: from when in `[from, to]` it held, to when a stream was open again (`u64::MAX` if
    /// none opened again), if there was such a stretch.
    pub fn last_outage(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let mut spans: Vec<(u64, u64)> = self.streams.iter().map(|s| (s.opened_ms, s.closed_ms.unwrap_or(u64::MAX))).collect();
        spans.sort_unstable();
        let mut covered: Vec<(u64, u64)> = Vec::new();
        for (opened, closed) in spans {
            match covered.last_mut() {
                Some(last) if opened <= last.1 => last.1 = last.1.max(closed),
                _ => covered.push((opened, closed)),
            }
        }
        let from = from.max(covered.first()?.0);
        let mut last = None;
        for (n, &(_, closed)) in covered.iter().enumerate() {
            // The gap from this span's close to the next one's open.
            let next = covered.get(n + 1).map_or(u64::MAX, |span| span.0);
            let moment = closed.max(from);
            if moment <= to && moment < next {
                last = Some((moment, next));
            }
        }
        last
    }
}

/// Whether two replies say the same (ids aside: the bridge answers under the client's id what
/// the relayer sent under the upstream one).
pub fn same_reply(a: &Value, b: &Value) -> bool {
    a.get("result") == b.get("result") && a.get("error") == b.get("error")
}

/// The user action a `tools/call` names (empty for other messages).
pub fn action_of(msg: &Value) -> String {
    if msg.get("method").and_then(Value::as_str) != Some("tools/call") {
        return String::new();
    }
    msg.pointer("/params/arguments/action").and_then(Value::as_str).unwrap_or("").to_string()
}
