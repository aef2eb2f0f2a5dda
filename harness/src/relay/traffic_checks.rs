//! The traffic a server starts: its notifications and its requests to the client (live cases
//! draw them, `RelayFault::ServerMessage`; the standard transports carry them). A bridge that
//! drops them breaks every feature built on them (log streams, tool-list refreshes, `roots`,
//! sampling); one that loses the client's answer leaves the server's request hanging.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::Facts;
use super::outcome_checks::CONNECT_MS;
use super::faults::SERVER_ID_META;
use crate::check::{capped, message};
use crate::trace::{TraceEvent, Violation};
use crate::verdicts;

/// The stream carrying the server's message closed (or the server restarted) as it was written.
const CUT: &str = "the stream carrying it closed, or the server restarted, as it was written";
/// Every POST of the answer was refused by the injected refusal, reset, or sent to a session the
/// server's restart lost, where it arrived.
const ANSWER_REFUSED: &str = "every POST of the answer was refused or reset by a fault";
/// A held link or a relayer bounce met the answer's POST, whose connect may fail unseen.
const UNSEEN_CONNECT: &str = "relayer_bounce or link_hold may have failed the answer's connect unseen";
/// The client closed stdin before the message could reach it, or its answer the server.
const CLIENT_LEFT: &str = "the client left first";
/// The session is another MCP client's: the bridge initialized it under another name and never
/// carried a request of the client's on it, and the client had a session of its own or none yet.
const ANOTHER_CLIENT: &str = "the bridge opened that session as another MCP client, and the client had its own or none yet";

/// The session is one the bridge opened and never sent anything on, while it initialized another
/// under the client's name; the client had that one, or none yet.
const BYSTANDER: &str = "the bridge never used that session, and opened the client's beside it";

/// One message the server wrote unasked: where, when, on which stream connection.
struct Sent {
    index: usize,
    at_ms: u64,
    session: String,
    stream: String,
    msg: Value,
    method: String,
}

/// The POSTs among `events` that carry an answer (no method) to the server's request `key`.
fn answer_posts<'a>(events: &'a [TraceEvent], key: &'a str) -> impl Iterator<Item = &'a TraceEvent> + 'a {
    events.iter().filter(move |e| e.host == host::RELAYER && e.kind == kind::HTTP_POST && e.text("id") == key && e.text("method").is_empty())
}

/// Whether a fault refused this POST of an answer where it arrived: the injected refusal, a
/// reset connection, or a session the server's restart lost (the request it answers died with
/// it). A refusal for another cause (a wrong token, an unknown session, a malformed body) is the
/// bridge's to answer for.
fn refused_by_a_fault(post: &TraceEvent) -> bool {
    matches!(post.text("cause").as_str(), "fault" | "reset" | "gone")
}

fn accepted(post: &TraceEvent) -> bool {
    (200..300).contains(&super::story::post_status(post))
}

/// The id a server request carries in its `_meta` (a JSON pointer's escaping of the key).
fn server_id(msg: &Value) -> Option<&Value> {
    msg.get("params")?.get("_meta")?.get(SERVER_ID_META)
}

/// Sessions the bridge opened that are not the client's way to the server ([`foreign_sessions`]).
#[derive(Default)]
struct Sessions {
    /// Initialized as another MCP client, and no request of the client's went on them.
    foreign: BTreeSet<String>,
    /// Never sent anything on, open while the bridge initialized another under the client's name.
    bystanders: BTreeSet<String>,
    /// Whether the bridge initialized a session under the client's own name.
    own: bool,
}

/// The sessions the bridge initialized as another MCP client: the `initialize` that opened one
/// named a client whose name does not contain the name the client gave, and no request of the
/// client's went on it; and whether the bridge also initialized a session under the client's own
/// name. mcp-remote 0.15.1 probes the transport with a session of its own,
/// `mcp-remote-fallback-test`, holds the client's `initialize` until the probe is done, then opens
/// the client's session as "sim-client (via mcp-remote 0.15.1)", and never closes or uses the
/// probe (harness error H3 of docs/findings.md). A bridge that speaks for the client only under
/// its own name (rmcp's `rmcp`, the Python SDK's `mcp`) opens no session under the client's name.
fn foreign_sessions(facts: &Facts<'_>) -> Sessions {
    let events = &facts.trace.events;
    let name_of = |msg: &Value| msg.pointer("/clientInfo/name").or_else(|| msg.pointer("/params/clientInfo/name")).and_then(Value::as_str).map(str::to_string);
    let client_sent = events.iter().filter(|e| e.host == host::CLIENT && e.kind == kind::MCP_SEND).map(message);
    let Some(client) = client_sent.filter(|msg| msg.get("method").and_then(Value::as_str) == Some("initialize")).find_map(|msg| name_of(&msg)) else {
        return Sessions::default();
    };
    let carried = |session: &str| {
        facts.stories.all_posts.iter().any(|(_, _, s, id, method, status)| s == session && !id.is_empty() && !method.is_empty() && method != "initialize" && *status == 202)
    };
    let opened = events.iter().filter(|e| e.host == host::RELAYER && e.kind == kind::RPC_INITIALIZE);
    let named: Vec<(String, String, u64)> = opened.filter_map(|e| Some((e.text("session"), name_of(&serde_json::from_str(&e.text("params")).ok()?)?, e.at_ms))).collect();
    let own = named.iter().any(|(_, name, _)| name.contains(&client));
    let foreign: BTreeSet<String> = named.iter().filter(|(session, name, _)| !name.contains(&client) && !carried(session)).map(|(session, _, _)| session.clone()).collect();
    // Bystanders: a session the bridge opened and never sent anything on (no `initialize`, no
    // POST at all), open while it initialized another under the client's name. mcp-remote
    // 0.15.1 over HTTP+SSE opens two such streams beside the one it gives the client
    // (live.v1.relay.none.dd6c57048042a12b).
    let own_at: Vec<u64> = named.iter().filter(|(_, name, _)| name.contains(&client)).map(|(_, _, at)| *at).collect();
    // Each session's life, from its first stream's opening to its last one's end.
    let mut life: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for stream in &facts.stories.streams {
        let closed = stream.closed_ms.unwrap_or(u64::MAX);
        let span = life.entry(stream.session.as_str()).or_insert((stream.opened_ms, closed));
        *span = (span.0.min(stream.opened_ms), span.1.max(closed));
    }
    let silent = |session: &str| !facts.stories.all_posts.iter().any(|post| post.2 == session);
    let beside = |(from, to): (u64, u64)| own_at.iter().any(|at| from <= *at && *at <= to);
    let bystanders = life.into_iter().filter(|(session, span)| silent(session) && beside(*span)).map(|(session, _)| session.to_string()).collect();
    Sessions { foreign, bystanders, own }
}

/// Every message the server started (a notification, or a request to the client) and wrote to a
/// stream that stayed open long enough to carry it reaches the client, unless the client had
/// left; and the client's answer to a server request reaches the server. A `ping` may instead
/// be answered by the bridge itself (it checks the server's peer, which the bridge is); a
/// `roots/list` may not (only the client knows its roots). Excused only by what
/// destroyed it: the stream carrying it closed (or the server restarted) within the slack after
/// it was written; every POST carrying the answer was refused or its connection reset; the
/// client closed stdin first. A message to a session the bridge opened as another MCP client
/// ([`foreign_sessions`]) is not the client's to read when the client had a session of its own
/// (the server sends each message to every session open) or none yet (its `initialize` still
/// unanswered: it was not yet in any session the server could address).
pub fn server_messages_delivered(facts: &Facts<'_>) -> Vec<Violation> {
    let slack = facts.slack_ms;
    let sessions = foreign_sessions(facts);
    let handshake = facts.requests.iter().find(|r| r.method == "initialize");
    let before_handshake = |at: u64| handshake.is_some_and(|r| r.answered.as_ref().is_none_or(|a| a.at_ms > at));
    let eof = facts.stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    let events = &facts.trace.events;
    let mut found = Vec::new();
    // A held link or a relayer bounce between `from` and `to` (plus a connect's time) may fail
    // an answer's POST connect unseen, as for any request.
    let unseen = |from: u64, to: u64| facts.unseen_connect(from, to + CONNECT_MS);
    let sent: Vec<Sent> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == host::RELAYER && e.kind == kind::REPLY_SENT && e.text("id").is_empty())
        .filter_map(|(index, e)| {
            let msg = message(e);
            let method = msg.get("method").and_then(Value::as_str)?.to_string();
            Some(Sent { index, at_ms: e.at_ms, session: e.text("session"), stream: e.text("stream"), msg, method })
        })
        .collect();
    for sent in sent {
        let not_the_clients = sessions.own || before_handshake(sent.at_ms);
        if sessions.foreign.contains(&sent.session) && not_the_clients {
            verdicts::excused(ANOTHER_CLIENT);
            continue;
        }
        if sessions.bystanders.contains(&sent.session) && not_the_clients {
            verdicts::excused(BYSTANDER);
            continue;
        }
        let arrives = facts.stories.released_ms(&sent.session, sent.at_ms, 2 * slack) + 2 * slack;
        if arrives >= eof || arrives + facts.sweep_period_ms > facts.horizon_ms {
            verdicts::excused(CLIENT_LEFT);
            continue;
        }
        // The connection that carried it, and whether it outlived the slack: its close, or a
        // restart of the server, ends it.
        let cut = events[sent.index..].iter().find(|e| {
            e.host == host::RELAYER
                && (e.kind == kind::RELAYER_START
                    || (e.kind == kind::STREAM_CLOSE && e.text("session") == sent.session && e.text("stream") == sent.stream))
        });
        if cut.is_some_and(|e| e.at_ms <= arrives) {
            verdicts::excused(CUT);
            continue;
        }
        let server_id = server_id(&sent.msg).cloned();
        let same = |read: &Value| {
            read.get("method").and_then(Value::as_str) == Some(sent.method.as_str())
                && match &server_id {
                    Some(id) => self::server_id(read) == Some(id),
                    None => read.get("params") == sent.msg.get("params"),
                }
        };
        let read = events[sent.index..]
            .iter()
            .find(|e| e.host == host::CLIENT && e.kind == kind::MCP_RECV && same(&message(e)));
        // A `ping` checks the server's own peer, the bridge, which may answer it itself; that
        // answer, like the client's, is excused only when every POST of it met the injected
        // refusal or reset (sdk hunt seed 2026, `v1.sdk.none.a703fe600c477f7c`: rmcp's client
        // answered a ping inside a `post_reject` window, and the one POST of it was refused; sdk
        // soak `v1.sdk.none.8fca668d268d3e3f`: inside a `post_reset` window, and it was reset).
        let key = server_id.as_ref().map(Value::to_string).unwrap_or_default();
        if read.is_none() && sent.method == "ping" {
            let posts: Vec<_> = answer_posts(&events[sent.index..], &key).collect();
            if posts.iter().copied().any(accepted) {
                verdicts::held();
                continue;
            }
            if !posts.is_empty() && posts.iter().copied().all(refused_by_a_fault) {
                verdicts::excused(ANSWER_REFUSED);
                continue;
            }
            // No POST of the bridge's answer at all, with a held link or a bounce as it went (sdk_rmcp
            // soak `v1.sdk_rmcp.none.81e1091ddeabc7cb`: a link hold began 100 ms after the ping).
            if posts.is_empty() && unseen(sent.at_ms, arrives) {
                verdicts::excused(UNSEEN_CONNECT);
                continue;
            }
        }
        let Some(read) = read else {
            let open = cut.map_or("the end".to_string(), |e| format!("{} ms", e.at_ms));
            let detail = format!(
                "the server sent {} at {} ms on {} (open until {open}), but the client never read it",
                sent.method, sent.at_ms, sent.session
            );
            found.push(facts.violation("server_messages_delivered", sent.index, detail));
            continue;
        };
        if server_id.is_none() {
            verdicts::held();
            continue;
        }
        // A request: the client's answer (under the id the client read) must reach the server,
        // under the id the server gave it.
        let read_id = message(read).get("id").cloned();
        let answered = events.iter().position(|e| {
            e.host == host::CLIENT && e.kind == kind::MCP_SEND && e.at_ms >= read.at_ms && {
                let msg = message(e);
                msg.get("method").is_none() && msg.get("id") == read_id.as_ref()
            }
        });
        let Some(answered) = answered else {
            // The client did not answer: a client's policy, not the bridge's to deliver.
            verdicts::held();
            continue;
        };
        let posts: Vec<_> = answer_posts(&events[answered..], &key).collect();
        if posts.iter().copied().any(accepted) {
            verdicts::held();
            continue;
        }
        let answer_at = events[answered].at_ms;
        if answer_at + 2 * slack >= eof || answer_at + facts.sweep_period_ms + 2 * slack > facts.horizon_ms {
            verdicts::excused(CLIENT_LEFT);
            continue;
        }
        if !posts.is_empty() && posts.iter().copied().all(refused_by_a_fault) {
            // Every POST of it was refused or reset where it arrived: a fault destroyed it.
            verdicts::excused(ANSWER_REFUSED);
            continue;
        }
        // A held link or a relayer bounce as the answer went may fail its POST's connect unseen,
        // as for any request (`outcome_checks::UNSEEN_CONNECT_FAULTS`; sdk soak
        // `v1.sdk.none.41a7e2e15deaf5f8`: rmcp's client began the answer's POST 50 ms before a
        // link hold, and that POST neither reached the relayer nor ended).
        if unseen(answer_at, answer_at + 2 * slack) {
            verdicts::excused(UNSEEN_CONNECT);
            continue;
        }
        let restarted = events[answered..].iter().any(|e| e.host == host::RELAYER && e.kind == kind::RELAYER_START && e.at_ms <= answer_at + 2 * slack);
        if restarted {
            verdicts::excused(CUT);
            continue;
        }
        let detail = format!(
            "the client answered the server's {} ({key}) at {answer_at} ms, but no POST of the answer reached the server",
            sent.method
        );
        found.push(facts.violation("server_messages_delivered", answered, detail));
    }
    capped(found)
}
