//! The relay checkers that judge end-to-end truth (ORACLES.md §1–4): each request's story at the
//! boundaries (the client's stdio, the relayer's log and streams) must close. The bridge's own
//! events only explain.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client::note_step;
use serde_json::Value;

use super::checks::{error_text, Answer, Facts, Request, CLOSE_OUT, INIT_FAILED};
use super::wire;
use super::story::{same_reply, Post, Sent, Story};
use crate::check::{capped, message};
use crate::trace::Violation;
use crate::verdicts;

/// Retries of a POST answered 429 or 5xx before the call fails, and the wait before retry `k`
/// (`250·2^k`): the bridge's documented retry policy, restated here.
pub const POST_RETRIES: usize = 2;
pub const RETRY_BASE_MS: u64 = 250;
/// How long after its last refusal a message whose retries are spent (or that was refused for
/// good) goes again at the soonest, as a new send: the backoff's next step, `250·2^POST_RETRIES`.
pub const NEXT_SEND_MS: u64 = RETRY_BASE_MS << POST_RETRIES;
/// A stream that lives less than this "ends soon after it opens", whatever closed it. One that
/// lived longer but surely short of the bridge's 2 s success mark is short too, unless the bridge
/// may have chosen to close it (for the client's `initialize`, after orphaned calls): that resets
/// its backoff, and if a fault ended the stream in the same instant the relayer records the
/// fault's close (relay soak v1.relay.none.b85141753c1335fe: the client's `initialize` and a
/// stream_eof at 1 200 ms, on a stream of 1 100 ms). The bridge chooses no close before this.
pub const SHORT_STREAM_MS: u64 = 1_000;
/// A stream that lives this long counts as a success: the bridge's next connect is immediate
/// (ARCHITECTURE.md, the relay bridge's behaviour: a stream that ends within 2 s of opening
/// is a failed attempt).
pub(super) const STABLE_STREAM_MS: u64 = 2_000;
/// From a connect to the relayer's `stream.open`: a TCP and an HTTP round trip.
pub(super) const CONNECT_MS: u64 = 100;
/// The reconnect backoff's cap (MODEL.md §1): the longest a bridge waits between two connects,
/// however many failed.
pub(super) const MAX_BACKOFF_MS: u64 = 15_000;
/// Faults under which a connect can fail without the relayer seeing it.
const UNSEEN_CONNECT_FAULTS: &[&str] = &["relayer_bounce", "link_hold"];
/// Faults that cut the relayer's streams (a restart cuts them all).
const CUTTING_FAULTS: &[&str] = &["stream_eof", "stream_flap", "relayer_bounce"];
/// How long the bridge remembers a closed-out id (`closed_out_retention_ms`, MODEL.md §1.4's
/// bounded retention window).
pub const CLOSED_OUT_RETENTION_MS: u64 = 600_000;
/// The bridge's idle task set: what runs once everything has settled.
pub const IDLE_TASKS: &str = "stream+sweeper+watchdog";

/// `min(15 000, 500·2^attempt)` (MODEL.md §1.3).
pub(super) fn backoff_ms(attempt: u64) -> u64 {
    500u64.saturating_mul(1 << attempt.min(20)).min(MAX_BACKOFF_MS)
}

impl Facts<'_> {
    /// Whether a fault that can fail a connect without the relayer seeing it (a bounce, a held
    /// link) held at some moment from `from` (less a connect's time) to `to`.
    pub(super) fn unseen_connect(&self, from: u64, to: u64) -> bool {
        self.stories.global_faults.iter().any(|(name, start, end)| {
            UNSEEN_CONNECT_FAULTS.contains(&name.as_str()) && *start <= to && end + CONNECT_MS >= from
        })
    }

    /// By when a new stream reaches the relayer at the latest, given that it was due by `due`
    /// and that `faults` (each until its heal) may have blocked or failed connects after `from`:
    /// a connect pending at the heal lands a connect later, one that failed is retried within
    /// the capped backoff (MODEL.md §1: `min(15 000, 500·2^attempt)`), however many attempts
    /// failed. A fixpoint: a fault that begins before the pushed-out bound pushes it again.
    pub(super) fn reconnect_due_past(&self, faults: &[&str], from: u64, due: u64) -> u64 {
        let windows: Vec<(u64, u64)> = self.healing(|name| faults.contains(&name)).collect();
        self.due_past(&windows, from, due)
    }

    /// The global faults `keep` names, each as `(start, healed)` ([`Self::healed_ms`]).
    fn healing<'a>(&'a self, keep: impl Fn(&str) -> bool + 'a) -> impl Iterator<Item = (u64, u64)> + 'a {
        let kept = self.stories.global_faults.iter().filter(move |(name, _, _)| keep(name));
        kept.map(|(name, start, end)| (*start, self.healed_ms(name, *start, *end)))
    }

    /// By when a bridge with no stream open since `from` has one again at the latest, unless it
    /// chose otherwise: the silence noticed and the capped backoff (`recovery_ms`), pushed out
    /// (as in [`Self::reconnect_due_past`]) by every fault that can keep a stream or a session
    /// down: a restart, a cut, a stall, a held link, a refusal window. Past it the outage is the
    /// bridge's doing (it did not reconnect, or gave the session up), not the fault's.
    fn stream_due_by(&self, from: u64) -> u64 {
        let refusals = self.stories.refusal_windows.iter().map(|(_, start, end)| (*start, *end));
        let windows: Vec<(u64, u64)> = self.healing(|name| name != "stdin_eof").chain(refusals).collect();
        self.due_past(&windows, from, from.saturating_add(self.recovery_ms()))
    }

    /// `due`, pushed out by each window `(start, healed)` that began by it and healed after
    /// `from` (less a connect) to its heal, a connect pending then, and the capped backoff.
    fn due_past(&self, windows: &[(u64, u64)], from: u64, due: u64) -> u64 {
        let mut due = due;
        loop {
            let healed = windows.iter().filter(|(start, healed)| *start <= due && healed + CONNECT_MS > from).map(|(_, healed)| *healed).max();
            let Some(healed) = healed else { return due };
            let next = due.max(healed + 2 * CONNECT_MS + MAX_BACKOFF_MS + 2 * self.slack_ms);
            if next == due {
                return due;
            }
            due = next;
        }
    }

    /// When the client left: its stdin's end, or the end of the run if that came first.
    fn client_left_ms(&self) -> u64 {
        self.stories.client_eof.as_ref().map_or(self.horizon_ms, |(_, at, _)| *at).min(self.horizon_ms)
    }

    /// When a global fault stops acting: its window's end, or for a restart (recorded at the
    /// kill) the relayer's next start.
    fn healed_ms(&self, name: &str, start: u64, end: u64) -> u64 {
        if name != "relayer_bounce" {
            return end;
        }
        self.relayer_back_ms(start).unwrap_or(self.horizon_ms)
    }

    /// When the relayer killed at `killed` started again, if it did.
    fn relayer_back_ms(&self, killed: u64) -> Option<u64> {
        self.trace.events.iter().find(|e| e.host == host::RELAYER && e.kind == kind::RELAYER_START && e.at_ms >= killed).map(|e| e.at_ms)
    }

    /// How long after a global fault ends it may still touch a request: a silent stream is
    /// noticed within the idle budget plus a watchdog period, then the reconnect backs off at
    /// most 15 s.
    pub(super) fn recovery_ms(&self) -> u64 {
        self.sse_idle_ms + self.watchdog_ms() + MAX_BACKOFF_MS + 4 * self.slack_ms
    }

    /// What a message needs to cross a healthy bridge and link: a few round trips (the
    /// session's handshake, if the bridge was still making it, and the POST itself), each
    /// within the slack.
    pub(super) fn delivery_ms(&self) -> u64 {
        4 * self.slack_ms
    }

    /// Whether the bridge may have chosen to close a stream open from `opened` to `closed`, as
    /// its boundaries show: the client wrote an `initialize` while it was open (the bridge
    /// replaces a session it initialized with made-up params), or a request was answered then
    /// only after the call deadline ran out (a close-out: two orphans make the bridge reconnect).
    fn close_maybe_chosen(&self, opened: u64, closed: u64) -> bool {
        let within = |at: u64| opened <= at && at <= closed + self.slack_ms;
        let initialize = self.requests.iter().any(|r| r.method == "initialize" && within(r.at_ms));
        let closed_out = self.requests.iter().filter_map(|r| r.answered.as_ref().map(|a| (r.at_ms, a.at_ms))).any(|(asked, answered)| within(answered) && answered >= asked + self.call_timeout_ms);
        initialize || closed_out
    }

    /// Whether `post` carried something the bridge sends before request `n`: a notification of
    /// a method the client had written before it, a session's handshake (an `initialize` or
    /// `notifications/initialized` the bridge sent on its own: the session carries nothing
    /// before it), and, for a serial pump only, a request the client wrote before it. A bridge
    /// that sends requests side by side (sdk, the bridges people install) holds none behind
    /// another's refusal.
    fn queued_before(&self, n: usize, post: &(usize, u64, String, String, String, u64)) -> bool {
        let written = self.requests[n].index;
        let method = post.4.as_str();
        let handshake = matches!(method, "initialize" | "notifications/initialized");
        if let Some(owner) = self.stories.post_owner(post.0) {
            return owner < n && (self.serial_pump || handshake);
        }
        let by_client = |upto: usize| {
            self.trace.events[..upto]
                .iter()
                .any(|e| e.host == host::CLIENT && e.kind == kind::MCP_SEND && message(e).get("method").and_then(Value::as_str) == Some(method))
        };
        handshake || by_client(written)
    }

    /// Until when a refusal (or reset) of a POST at `at` holds what is queued behind it: the
    /// fault window that refused it, if one did, ends; the bridge waits out its retry backoff
    /// past its retries (`250·2^POST_RETRIES`) and needs a round trip for the handshake and a
    /// POST (ahead of the request's own) to go through.
    fn refusal_held_ms(&self, at: u64) -> u64 {
        let windows = self.stories.refusal_windows.iter().filter(|(_, start, end)| *start <= at && at <= end + self.slack_ms);
        let stood = windows.map(|(_, _, end)| *end).fold(at, u64::max);
        stood + NEXT_SEND_MS + CONNECT_MS + 2 * self.slack_ms
    }

    /// How often the bridge's watchdog checks for silence: `max(500, idle/3)` (MODEL.md §1.3).
    pub(super) fn watchdog_ms(&self) -> u64 {
        (self.sse_idle_ms / 3).max(500)
    }

    /// From the last byte a silent stream carried to the watchdog tick that notices it: the idle
    /// budget, one watchdog period and the slack both ways.
    pub(super) fn silence_noticed_ms(&self) -> u64 {
        self.sse_idle_ms + self.watchdog_ms() + 2 * self.slack_ms
    }

    /// When a request's life ends for judging faults: its answer, or its bound.
    fn life_end(&self, request: &Request) -> u64 {
        let bound = request.at_ms + self.call_timeout_ms + self.sweep_period_ms + self.slack_ms;
        request.answered.as_ref().map_or(bound, |a| a.at_ms.max(request.at_ms))
    }

    /// Why a request may legitimately not succeed, if anything touched it: the mechanism, as
    /// excuse accounting names it (a mock fault that fired on it, a POST of it or ahead of it the
    /// relayer refused, a global fault's observed effect on it, the client closing stdin,
    /// the client's own cancellation, or a tool slower than the call deadline).
    ///
    /// `delayed_to` is the moment a delay must reach to be excused (a POST that ended a gap);
    /// without it, the request's outcome: its error, or its deadline less its tool's run.
    pub(super) fn touched(&self, n: usize, delayed_to: Option<u64>) -> Option<&'static str> {
        let (request, story) = (&self.requests[n], &self.stories.of[n]);
        // A fault that fired on this request excuses it only where its effect forces the outcome:
        // a reply destroyed (swallowed, withheld) or a POST reset, or a reply delayed past the
        // call deadline. A duplicated reply still answers; a slow tool is judged by its own
        // finish below.
        let deadline = request.at_ms + self.call_timeout_ms;
        let in_time = story.sent.iter().any(|sent| self.stories.released_ms(&sent.session, sent.at_ms, 2 * self.slack_ms) + 3 * self.slack_ms < deadline);
        for fault in &story.fired {
            match fault.as_str() {
                "swallow_reply" => return Some("swallow_reply destroyed its reply"),
                "withhold_replies" => return Some("withhold_replies destroyed its reply"),
                // A reset forces an error only while the bridge has not read the relayer's
                // acceptance of the request: after one, the work is the relayer's, and its answer
                // still comes (a replay is answered from the execution log).
                "post_reset" if self.acceptance_read_before_reset(story).is_none() => return Some("post_reset cut a POST of it"),
                "post_reset" if self.replays_cut_after_outage(story) => return Some("an outage lost its reply and post_reset cut every replay of it"),
                "late_reply" if !in_time => return Some("late_reply delayed its reply past the deadline"),
                _ => {}
            }
        }
        // The relayer wrote its reply before the deadline, and a stall or a held link kept the
        // stream's bytes from the bridge until (within the slack of) the deadline (relay hunt
        // seed 2026, v1.relay.none.ec68f2ccd3d04994: a stall from 5 028 ms held the reply
        // written at 5 825 ms past the 8 929 ms deadline).
        let held_back = story.sent.iter().any(|sent| {
            let released = self.stories.released_ms(&sent.session, sent.at_ms, 2 * self.slack_ms);
            sent.at_ms < deadline && released > sent.at_ms && released + 3 * self.slack_ms >= deadline
        });
        if held_back && !in_time {
            return Some("a stall or held link kept its reply from the bridge past the deadline");
        }
        // A flap dropped the stream its POST was answered with before a byte of it, so no event
        // id came that the bridge could resume it from (Streamable HTTP resumes a stream only
        // after an event id: the answer written there later reaches no one), and no reply came
        // in time another way (sdk_rmcp v1.sdk_rmcp.none.35aa642faa126d63 and sdk
        // v1.sdk.none.026adfa100cabc9d: rmcp then fails the call, "Transport closed").
        let dropped: Vec<_> = story.post_streams.iter().map(|&n| &self.stories.streams[n]).filter(|stream| stream.dropped_unwritten).collect();
        let on_dropped = |sent: &Sent| dropped.iter().any(|stream| stream.session == sent.session && stream.label == sent.stream);
        let reached = story.sent.iter().filter(|sent| !on_dropped(sent)).any(|sent| self.stories.released_ms(&sent.session, sent.at_ms, 2 * self.slack_ms) + 3 * self.slack_ms < deadline);
        if !dropped.is_empty() && !reached {
            return Some("stream_flap dropped its POST's stream before any event of it, leaving nothing to resume");
        }
        // A fault cut the stream its POST was answered with while its tool ran, and the server
        // never wrote the answer, there or anywhere (rmcp's server drops it: R1 of
        // docs/findings.md, sdk_rmcp v1.sdk_rmcp.none.b2ebd266e510a628).
        let cut_by_fault = |stream: &super::story::Stream| {
            stream.cut_ms().is_some_and(|closed| {
                let mut faults = self.stories.global_faults.iter().filter(|(name, _, _)| CUTTING_FAULTS.contains(&name.as_str()));
                faults.any(|(_, start, end)| *start <= closed && closed <= end + self.slack_ms)
            })
        };
        // rmcp's server also drops an answer written but still held (by a stall) when the cut
        // came: it resumes nothing it had not sent (sdk_rmcp hunt seed 2026,
        // v1.sdk_rmcp.none.8d1132b23bef40d0: answers written under a stall from 289 791 ms, the
        // streams cut by stream_eof at 328 551 ms; soak v1.sdk_rmcp.none.01fe2b70256ef7b4: a
        // tools/list answer, late, written under a stall that ended as stream_eof cut it).
        let unwritten = story.sent.is_empty() && story.done_ms.is_some();
        let unsent_at = |stream: &super::story::Stream| {
            let cut = stream.closed_ms.unwrap_or(u64::MAX);
            stream.style == "rmcp" && !story.sent.is_empty() && !story.sent.iter().any(|sent| self.stories.on_its_way(sent, self.slack_ms, cut))
        };
        if story.post_streams.iter().map(|&n| &self.stories.streams[n]).any(|stream| cut_by_fault(stream) && (unwritten || unsent_at(stream))) {
            return Some("a fault cut its POST's stream while it ran, and the server never wrote its answer");
        }
        // Standard MCP over HTTP+SSE resumes nothing: a session lives as long as its one stream,
        // and a server keeps no log to answer a request sent again (the relay API's idempotency
        // keys are its own, so the relay family is judged on its replays). A fault that cut the
        // stream of the session that last accepted it, before any answer of it was written
        // there, ended that session and lost the answer with it; a bridge that fails the request
        // once the cut came tells the truth (mcp-remote 0.15.1 over HTTP+SSE,
        // live.v1.relay.none.ebaddc54ff94e256: three calls accepted, a stream_flap cut the
        // stream, the server logged their answers lost, and mcp-remote failed them "the
        // connection to the remote server dropped before this could be answered" as its new
        // stream opened).
        let lost_with_session = super::oracles::is_live(self.trace)
            && story.posts.iter().rev().find(|p| p.status == 202).and_then(|p| self.stories.stream(&p.session)).is_some_and(|stream| {
                stream.label.is_empty()
                    && cut_by_fault(stream)
                    && stream.cut_ms().is_some_and(|cut| {
                        let written = story.sent.iter().any(|sent| sent.session == stream.session && sent.at_ms < cut);
                        !written && request.answered.as_ref().is_none_or(|a| a.at_ms + self.slack_ms >= cut)
                    })
            });
        if lost_with_session {
            return Some("a fault cut the one stream of the HTTP+SSE session that accepted it, and its answer was lost with the session");
        }
        // The server itself ended the stream while its tool ran, with no fault and no restart,
        // and never wrote the answer: rmcp's server drops a session its worker saw no event on
        // for `keep_alive` (5 min), though a tool of it still runs (sdk_rmcp hunt seed 8,
        // v1.sdk_rmcp.none.76d0375e537e499b: a 302 s tool; docs/findings.md, R6). A stream it
        // ended because the client had cancelled the request is the client's doing (sdk_rmcp
        // hunt seed 2026, v1.sdk_rmcp.none.75a85daeaaf201c2: rmcp ends the POST's stream as the
        // `notifications/cancelled` arrives), and is named so below.
        let ended_by_server = |stream: &super::story::Stream| {
            let exec = story.execs.first().map_or(u64::MAX, |(_, at)| *at);
            stream.cut_ms().is_some_and(|closed| {
                exec <= closed && !self.stories.restarts.iter().any(|(restart, _)| *restart == closed) && !self.cancelled_by_client_by(request, closed)
            })
        };
        if unwritten && story.post_streams.iter().any(|&n| ended_by_server(&self.stories.streams[n])) {
            return Some("the server ended its POST's stream while its tool ran, and never wrote its answer");
        }
        // The relayer restarted while it was in flight, or before the bridge could know (no
        // 404 had told it the session was gone), its answer not yet written: the restart
        // destroyed the work or the connection carrying it, or left a request the bridge could
        // not tell run from unrun. An answer written before the restart but not on its way to the
        // bridge died with the relayer: one a stall held past it (sdk_rmcp hunt seed 2026,
        // v1.sdk_rmcp.none.a9013d6a3e0026d7: written at 23 434 ms, the restart at 23 500 ms), or
        // one written to a stream a fault had cut, for a resumption the restart forestalled (sdk
        // hunt seed 8, v1.sdk.none.504bf1d910b6e2e7: cut at 1 050 ms, written at 2 957 ms, the
        // restart at 3 000 ms).
        // Excused when the bridge failed it as the connection died or
        // as it learned the session was gone (sdk v1.sdk.none.e6a94890879c99b8: rmcp's
        // "Transport send error" for a call whose tool was running, and for one whose POST was
        // connecting; sdk_rmcp soak v1.sdk_rmcp.none.834c4f015692b487: a write POSTed on the
        // forgotten session just before the first 404, which the bridge may not send again). A
        // bridge that fails it later is judged on that decision. So is one whose every POST came
        // after the restart and met a 404: the relayer ran nothing of it and told the bridge so,
        // which calls for a reconnect and a resend (MODEL.md §1.4), not a failure; the restart
        // did not cut it in flight (supergateway 4.0.0 over Streamable HTTP,
        // live.v1.relay.none.4696a795d76956b0: a call written 1.6 s after the relayer was back,
        // failed on its own POST's 404, was excused as cut in flight).
        // A request whose tool the relayer had already run may not be sent again (it would run
        // twice), and its answer is gone with the relayer: failing it at any time before its
        // deadline is the one true outcome left, so its failure is not held to the moment the
        // bridge learned (sdk soak v1.sdk.none.b61b267711576fa0: run at 14 600 ms, its stream cut
        // by a flap, the restart at 15 000 ms, failed at 16 050 ms once the bridge had a new
        // session).
        let met_404 = story.posts.iter().any(|p| p.status == 404 && !p.reset);
        let restarted = self.stories.restarts.iter().any(|&(restart, told)| {
            // The 404 reaches the bridge a connect's time after the relayer wrote it.
            let learned = if told == u64::MAX { restart } else { told + CONNECT_MS };
            let ran_before = story.execs.iter().any(|(_, at)| *at < restart);
            let told_unrun = met_404 && story.posts.iter().all(|p| p.at_ms >= restart);
            let failed_by = if ran_before { request.at_ms + self.call_timeout_ms + self.slack_ms } else { learned + CONNECT_MS + 2 * self.slack_ms };
            request.at_ms <= learned
                && !told_unrun
                && !story.sent.iter().any(|sent| self.stories.on_its_way(sent, self.slack_ms, restart))
                && request.answered.as_ref().is_some_and(|a| a.at_ms >= restart && a.at_ms <= failed_by)
        });
        if restarted {
            return Some("a relayer restart cut it in flight, and the bridge failed it as the connection died");
        }
        // Written as the relayer went down (from the kill until a connect after it listened
        // again), no POST of it reached the relayer, and failed by the time the new relayer
        // could have answered: the restart failed the connect it waited on (its own, or the
        // bridge's new handshake), a network error the bridge fails a request on (MODEL.md §1.4;
        // sdk_rmcp soak v1.sdk_rmcp.none.ac17abfeef2535f6: killed at 26 100 ms, written at
        // 26 108 ms, "cannot connect to the server … when send initialize request" at 26 150 ms).
        let refused = story.posts.is_empty()
            && self.stories.restarts.iter().map(|&(killed, _)| (killed, self.relayer_back_ms(killed).unwrap_or(u64::MAX))).any(|(killed, back)| {
                let reconnected = back.saturating_add(CONNECT_MS + self.slack_ms);
                killed <= request.at_ms && request.at_ms <= reconnected && request.answered.as_ref().is_some_and(|a| a.at_ms <= reconnected + self.slack_ms)
            });
        if refused {
            return Some("a relayer restart failed the connect it waited on, and the bridge failed it on that network error");
        }
        // A reset is no refusal (its status is the relayer's, or 0 when it was cut unread): it is
        // judged above, by whether it could force the outcome.
        // Only a refusal no accepted POST of it followed: once one got through, the refusal no
        // longer stood between it and its answer.
        // A 404 is no refusal of the request: it says the session is gone, the relayer ran
        // nothing, and the bridge reconnects and sends it on the next session (MODEL.md §1.4). A
        // bridge that fails it instead is judged on that decision; a restart behind the 404 is
        // excused above, by what it did to the request.
        let accepted_last = story.posts.iter().rposition(|p| p.status == 202);
        if story.posts.iter().skip(accepted_last.map_or(0, |n| n + 1)).any(|p| p.status != 202 && p.status != 404 && !p.reset) {
            return Some("the relayer refused a POST of it");
        }
        let end = self.life_end(request);
        // It waited for a session whose handshake answer a fault destroyed, and its life ended
        // within a reconnect's time of the last such loss (sdk soak,
        // v1.sdk.none.5351f87dd73dea51: two answers swallowed, the run over before the third
        // handshake). A bridge that waits on a lost answer for longer is judged.
        let first_post = story.posts.first().map_or(u64::MAX, |p| p.at_ms);
        let lost = self.stories.handshake_lost.iter().filter(|lost| **lost <= end && **lost < first_post).max();
        if lost.is_some_and(|lost| end < lost + self.recovery_ms()) {
            return Some("a fault destroyed the answer to the handshake it waited on");
        }
        // The pump posts one request at a time: a POST the relayer refused while this request
        // waited (another request's, or the session's `initialize`) held it in the queue.
        // (The relayer's clock may read up to a slack behind the client's.)
        // A reset one ahead of it (the session's `initialize`, another request) holds it the same
        // way, for the retries' backoff or a handshake tried again.
        // Ahead of it means in the queue before it: a POST that came before its own first one,
        // or before its replay once an outage after its last POST lost its session (the replay
        // waits for the new session's handshake: relay soak v1.relay.none.cf5752d68885f9af, a
        // call accepted, its stream ended, and the new session's `initialize` refused 401),
        // carrying a message the client wrote before it, or the session's handshake, which the
        // bridge sends before anything else. A refusal of a message written after it, or one
        // after its own POST went out on a session that stayed, held nothing of it. (Until this
        // round any other POST in its life counted.)
        let own_first_post = story.posts.first().map_or(end, |p| p.at_ms.min(end));
        let to_replay = |at: u64| story.posts.iter().rev().find(|p| p.at_ms <= at).is_some_and(|p| self.stories.no_stream_during(p.at_ms, at));
        let ahead = || {
            self.stories.all_posts.iter().filter(move |p| p.1 + self.slack_ms >= request.at_ms && p.1 <= end && (p.1 <= own_first_post || to_replay(p.1)) && self.queued_before(n, p))
        };
        // A refusal or reset ahead holds it only while it stands: until the POST it met, or the
        // end of the fault window that met it, then the bridge's wait once its retries are spent
        // and a round trip for the handshake and the POST. It forces the outcome only when it
        // stood until too late: the request's error came while it held (the bridge fails
        // promptly what a refusal for good stands in front of), or it held to within the
        // request's run of its deadline. A refusal that ended in time leaves the bridge's wait
        // past it to be judged (relay mutation shard 5/48: replays owed behind a refused
        // `initialize` never sent once the refusal ended at 7 351 ms, closed out at 11 420 ms).
        let run = story.done_ms.zip(story.execs.first()).map_or(0, |(done, (_, exec))| done.saturating_sub(*exec));
        let outcome = delayed_to.unwrap_or_else(|| request.answered.as_ref().map_or(u64::MAX, |a| a.at_ms).min(deadline.saturating_sub(run)));
        if ahead().any(|p| self.stories.reset_after_admit.contains(&p.0) && self.refusal_held_ms(p.1) >= outcome) {
            return Some("post_reset cut a POST ahead of it until too late for it");
        }
        if ahead().any(|p| p.5 != 202 && p.5 != 404 && self.refusal_held_ms(p.1) >= outcome) {
            return Some("the relayer refused a POST ahead of it until too late for it");
        }
        // The pump posts one request at a time, flushing in order what waited while no stream
        // was open (MODEL.md §1.4): a request written behind that backlog waits for its POSTs,
        // and one whose own POST came only as its deadline was ending (or never) met the deadline
        // in the queue an outage left (relay soak v1.relay.none.dba7d79bebb7a81d: nine requests
        // buffered through a bounce's reconnect, the tenth written as the stream came back and
        // POSTed 1 344 ms later, past its 1 316 ms deadline). The backlog must be moving: a pump
        // that idles with requests waiting is `requests_posted_promptly`'s to judge. A bridge
        // that sends requests side by side has no such queue.
        // A held link is an outage the relayer does not see (its stream stays open on its side
        // until the hold ends): what the client wrote while it held queued the same way (relay
        // hunt seed 0x7dfaf32, v1.relay.none.19e28fb43c19a010: a hold from 1 469 to 9 688 ms,
        // eight requests buffered, the last written at 5 377 ms and still queued behind six
        // POSTs, 150 ms apiece, at its 10 802 ms deadline).
        let own_first = story.posts.first().map_or(end, |p| p.at_ms);
        let cut_off = |at: u64| self.stories.no_stream_during(at, at) || self.stories.link_held(at, at, 0);
        let backlog = self.requests[..n].iter().zip(&self.stories.of).any(|(ahead, ahead_story)| {
            cut_off(ahead.at_ms) && ahead_story.posts.iter().any(|p| p.at_ms + self.slack_ms >= request.at_ms && p.at_ms <= own_first)
        });
        if self.serial_pump && backlog && own_first + 2 * self.slack_ms >= deadline {
            return Some("the backlog an outage or a held link left held it in the pump's queue past its deadline");
        }
        // A held link carries nothing either way: a request whose life ended while it held (or
        // within a round trip of its end) could reach the relayer, or its answer the bridge, by
        // no path (relay hunt seed 2026, v1.relay.none.83c1509bf8df3901: a hold from 11 889 to
        // 27 000 ms took the bridge's reconnect and both tools/list past their deadline).
        if self.stories.link_held(end, end, 2 * self.slack_ms + CONNECT_MS) {
            return Some("a held link cut the bridge off from the relayer as its life ended");
        }
        // A global fault (a stream's end, a stall, a bounce, a held link) excuses only through
        // its observed effects: a reply it kept back (above), a POST it refused or reset, or an
        // outage of the request's life (no stream open: the bridge had no session to carry it)
        // that lasted until too late for it to be served. The bridge buffers what is written in
        // an outage and replays what was in flight to the new session (MODEL.md §1.4), so once
        // a stream is back, the request needs only a connect, its POST's round trip and its
        // tool's run (as observed) before its deadline; an outage that healed in time excuses
        // nothing, and a bridge that gave up during it is judged on that decision.
        // The outage excuses only as long as a fault could keep it: a bridge that never
        // reconnects (or gives its session up) past the faults' heal and its backoff is judged
        // (supergateway 4.0.0 over Streamable HTTP, live.v1.relay.none.4696a795d76956b0: its
        // session forgotten by a restart at 35 036 ms, every call failed "404 … Session not
        // found" until stdin closed at 78 991 ms, no stream open again, all excused as "the
        // bridge was reconnecting").
        if let Some((lost, back)) = self.stories.last_outage(request.at_ms, end) {
            let back = back.min(self.stream_due_by(lost));
            if back.saturating_add(CONNECT_MS + 2 * self.slack_ms + run) >= deadline {
                return Some("no stream was open until too late for it to be served (the bridge was reconnecting)");
            }
        }
        if let Some((_, eof, _)) = &self.stories.client_eof {
            if *eof <= end {
                return Some("the client closed stdin");
            }
        }
        if self.cancelled_by_client(request) {
            return Some("the client cancelled it");
        }
        // A tool that never ran (its call was never served) ran past nothing.
        if story.action.is_empty() || story.execs.is_empty() {
            return None;
        }
        self.tool_outran(request, story)
    }

    /// Why a call whose tool ran could not be answered in time: its last run was still going at
    /// the deadline, or a relayer restart killed it before it finished. The restart destroyed the
    /// work and its answer (the relayer forgets a run it cut short): the bridge may fail the call
    /// or run it again, and an error says no more than the truth (sdk hunt seed 2026,
    /// v1.sdk.none.612dee8fdb042144: a 1 120 ms tool started at 10 650 ms, the restart at
    /// 10 800 ms, the call failed at 12 100 ms; this was once labelled a tool that ran past the
    /// deadline, 8 957 ms later).
    fn tool_outran(&self, request: &Request, story: &Story) -> Option<&'static str> {
        let deadline = request.at_ms + self.call_timeout_ms;
        if let Some(done) = story.done_ms {
            return (done + self.slack_ms >= deadline).then_some("its tool ran past the call deadline");
        }
        let &(_, last_run) = story.execs.last()?;
        let killed = self.stories.restarts.iter().any(|&(at, _)| at > last_run && at + self.slack_ms < deadline);
        Some(if killed { "a relayer restart killed its tool before it finished" } else { "its tool ran past the call deadline" })
    }

    /// The POST of a request whose acceptance the bridge read (the relayer answered 202, the
    /// connection was not reset, and no bounce or held link could have lost the answer) before
    /// the request's last reset POST, if there was one.
    fn acceptance_read_before_reset<'s>(&self, story: &'s Story) -> Option<&'s Post> {
        let last_reset = story.posts.iter().rposition(|p| p.reset)?;
        story.posts[..last_reset].iter().find(|p| p.status == 202 && !p.reset && !self.unseen_connect(p.at_ms, p.at_ms + CONNECT_MS))
    }

    /// Whether the bridge's session ended between the relayer's accepted POST of a request and
    /// its replays (a moment with no stream open), no reply to it was written while a stream was
    /// open to carry it, and the injected reset cut every replay: the answer the acceptance
    /// promised could come by no path. (A bridge that did not replay, or whose replay got
    /// through, is judged.)
    fn replays_cut_after_outage(&self, story: &Story) -> bool {
        let Some(accepted) = self.acceptance_read_before_reset(story) else { return false };
        let replays: Vec<&Post> = story.posts.iter().filter(|p| p.index > accepted.index).collect();
        let Some(first) = replays.first() else { return false };
        replays.iter().all(|p| p.reset)
            && self.stories.no_stream_during(accepted.at_ms, first.at_ms)
            && story.sent.iter().all(|sent| self.stories.no_stream_during(sent.at_ms, sent.at_ms))
    }

    /// Whether the client itself cancelled `request`: it wrote a `notifications/cancelled` naming
    /// the request's id after the request and before its answer. MCP asks the receiver not to
    /// answer a cancelled request and the client to ignore an answer that comes anyway, so
    /// whatever answers it (mcp-proxy's own "Request cancelled" error) is no lie to the user.
    fn cancelled_by_client(&self, request: &Request) -> bool {
        self.cancelled_by_client_by(request, u64::MAX)
    }

    /// Whether the client cancelled `request` (as in [`Self::cancelled_by_client`]) at or before
    /// `until_ms`.
    fn cancelled_by_client_by(&self, request: &Request, until_ms: u64) -> bool {
        let Some(id) = &request.id else { return false };
        let until = request.answered.as_ref().map_or(self.trace.events.len(), |a| a.index);
        let written = self.trace.events.get(request.index + 1..until).unwrap_or_default();
        written.iter().filter(|e| e.host == host::CLIENT && e.kind == kind::MCP_SEND && e.at_ms <= until_ms).any(|e| super::story::cancellation(e).is_some_and(|(_, named)| named == *id))
    }

    /// The relayer reply a message the client read equals, if any.
    pub(super) fn relayer_sent<'s>(story: &'s Story, msg: &Value) -> Option<&'s Sent> {
        story.sent.iter().find(|sent| same_reply(&sent.msg, msg))
    }
}

/// A request no fault touched succeeds with the relayer's own answer (and so does every request
/// after heal, since nothing touches those). A request the relayer refused is answered or sent
/// again: the refusal (an HTTP status, or a reset connection) reached the bridge, so it may
/// explain an error, never silence (ORACLES.md §8: what the bridge does next is its decision).
///
/// An excuse is weighed only for an outcome that needs one: a true answer holds whatever faults
/// met the request. Excused share on seed 2026's 1 000 cases: 9.4 % (relay), 8.8 % (sdk),
/// 11.4 % (sdk_rmcp): requests that a fault's window met and that ended in an error or no
/// answer. Each excuse is a mechanism of [`Facts::touched`]; a request it excuses is still
/// judged by `reply_accounting` (a reply the relayer sent reaches the client) and
/// `truthful_endings` (its error says what happened).
pub fn user_outcomes(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        if !request.judged() {
            continue;
        }
        if let Some(detail) = refused_then_silent(facts, n) {
            found.push(facts.violation("user_outcomes", request.index, detail));
            continue;
        }
        if let Some((index, detail)) = gave_up_accepted_work(facts, n) {
            found.push(facts.violation("user_outcomes", index, detail));
            continue;
        }
        if let Some(detail) = passed_over(facts, n) {
            found.push(facts.violation("user_outcomes", request.index, detail));
            continue;
        }
        // The answer is true if it answers a request of this id the client had sent by then:
        // this one, or one that reused the id while it was in flight (JSON-RPC forbids it; a
        // bridge that forwards both answers each, in whichever order they finish, and the first
        // answer is paired with the first request). A ping checks the connection it is sent on,
        // and its one true answer is an empty result: a bridge that answers it itself
        // (mcp-proxy's stdio server does) tells the client the truth, whether or not the server
        // heard it. A true answer holds whatever faults met the request: an excuse is weighed
        // only for an outcome that needs one (no answer, or one the relayer never sent).
        // A listing a bridge serves from its cache (rmcp's client does, src/service/client.rs:
        // 1932-1940) is true if it is the list the relayer last sent before it. The relayer's
        // own "session not initialized" refusal, forwarded as it was written, is true too
        // (mcp-remote forwards it, harness error H4 of docs/findings.md): whether the bridge
        // owed a handshake and a resend instead is its promise `refused_requests_resent`.
        let true_answer = request.answered.as_ref().is_some_and(|answer| {
            facts.requests.iter().zip(&facts.stories.of).any(|(asked, asked_story)| {
                let refused_with = || asked_story.refusals.iter().any(|r| same_reply(&r.msg, &answer.msg));
                asked.id == request.id
                    && asked.index < answer.index
                    && (Facts::relayer_sent(asked_story, &answer.msg).is_some() || refused_with() || (asked.method == "ping" && empty_result(&answer.msg)))
            }) || (request.method == "tools/list" && last_list_before(facts, answer.index).is_some_and(|list| same_reply(&list.msg, &answer.msg)))
                || reused_in_flight_answered(facts, request, answer)
                || reused_in_flight_refused(facts, request, answer)
        });
        if true_answer {
            verdicts::held();
            continue;
        }
        // A client whose `initialize` was answered with an error has no session to ask on (MCP
        // has it stop there): what a bridge answers to a request it sends after is the client's
        // own doing (supergateway, live.v1.relay.none.36de436b84982a83: "Not connected" to each
        // call after ECONNREFUSED answered the `initialize`).
        let handshake = facts.requests.iter().filter(|asked| asked.method == "initialize").filter_map(|asked| asked.answered.as_ref());
        if handshake.filter(|answer| answer.index < request.index).max_by_key(|answer| answer.index).is_some_and(|answer| answer.msg.get("error").is_some()) {
            verdicts::excused("the client's initialize was answered with an error before it");
            continue;
        }
        if let Some(mechanism) = facts.touched(n, None) {
            verdicts::excused(mechanism);
            continue;
        }
        let id = request.id.as_deref().unwrap_or("");
        let detail = match &request.answered {
            None => format!("{} id {id}: no fault forced its outcome, never answered", request.method),
            Some(answer) => format!(
                "{} id {id}: no fault forced its outcome, answered with {} which the relayer never sent (it sent {} replies for it)",
                request.method,
                answer.msg,
                facts.stories.of[n].sent.len()
            ),
        };
        let index = request.answered.as_ref().map_or(request.index, |a| a.index);
        found.push(facts.violation("user_outcomes", index, detail));
    }
    capped(found)
}

/// Whether `answer` is the relayer's reply to a request that reused `request`'s id while it was
/// in flight, as a bridge that forwards such a reuse gets it: the relayer logged the reply under
/// this client id after `request` was written (a stale copy of an earlier request's reply, sent
/// before it, is no such answer). The stories leave a reuse in flight out (a bridge is to refuse
/// it at once), so without this the answer the client's own reuse got first was read as made up
/// (supergateway, live.v1.relay.none.4621f7cc49223639: three requests of id 1 written at once,
/// all forwarded, the `tools/list` answered first).
fn reused_in_flight_answered(facts: &Facts<'_>, request: &Request, answer: &Answer) -> bool {
    let Some(id) = request.id.as_deref() else { return false };
    let reused = facts.requests.iter().any(|other| other.dup && other.id.as_deref() == Some(id) && other.index > request.index && other.index < answer.index);
    reused
        && facts.trace.events[..answer.index].iter().any(|e| {
            e.host == host::RELAYER && e.kind == kind::REPLY_SENT && e.text("client_id") == id && e.at_ms + facts.slack_ms >= request.at_ms && serde_json::from_str::<Value>(&e.text("msg")).is_ok_and(|sent| same_reply(&sent, &answer.msg))
        })
}

/// Whether `answer` is a bridge's error for a request that reused `request`'s id while it was in
/// flight and whose POST the relayer refused: the relayer refused a POST under this client id
/// after the reuse was written, and the client read an error under the id after that. The error
/// is the reuse's truthful answer (mcp-remote over HTTP+SSE, live.v1.relay.none.c7165beb728b4b4e:
/// `tools/call` 3 accepted, a `tools/list` under id 3 refused 500, and "Error POSTing to endpoint
/// (HTTP 500)" the first answer under id 3).
fn reused_in_flight_refused(facts: &Facts<'_>, request: &Request, answer: &Answer) -> bool {
    let Some(id) = request.id.as_deref() else { return false };
    let Some(reuse) = facts.requests.iter().find(|other| other.dup && other.id.as_deref() == Some(id) && other.index > request.index && other.index < answer.index) else {
        return false;
    };
    let error = answer.msg.get("error").is_some() || answer.msg.pointer("/result/isError") == Some(&Value::Bool(true));
    // A POST no story owns: the stories leave the reuse out, so a refusal of the request's own
    // POST (its story's) is no refusal of the reuse.
    error
        && (reuse.index..answer.index).any(|i| {
            let e = &facts.trace.events[i];
            e.host == host::RELAYER && e.kind == kind::HTTP_POST && e.text("client_id") == id && super::story::post_status(e) != 202 && facts.stories.post_owner(i).is_none()
        })
}

/// Whether request `n` was dropped: never answered, no POST of it (by its id) reached the
/// relayer, the client did not cancel it, and yet the relayer accepted a POST of a request the
/// client wrote after it, a round trip before the client left. The bridge could forward, and
/// forwarded what came later: leaving this one out was its decision, which no fault explains
/// (an attempt that failed unseen, in a restart, leaves the bridge to answer or send again),
/// and the client's leaving does not either. A bridge without a deadline of its own owes no
/// answer by any time, so without this the client's leaving excused every request it never
/// sent on (supergateway's and mcp-remote's big ids: an id beyond 2^53 dropped by the SDK's
/// schema, or sent on rounded, as another request's).
fn passed_over(facts: &Facts<'_>, n: usize) -> Option<String> {
    let (request, story) = (&facts.requests[n], &facts.stories.of[n]);
    if request.answered.is_some() || !story.posts.is_empty() || facts.cancelled_by_client(request) {
        return None;
    }
    let left = facts.client_left_ms();
    let forwarded_by = left.checked_sub(CONNECT_MS + 2 * facts.slack_ms)?;
    let (later, post) = facts.requests.iter().zip(&facts.stories.of).filter(|(later, _)| later.index > request.index && later.judged()).find_map(|(later, later_story)| {
        let accepted = later_story.posts.iter().find(|p| (200..=299).contains(&p.status) && !p.reset && p.at_ms <= forwarded_by);
        accepted.map(|post| (later, post))
    })?;
    Some(format!(
        "{} id {}: written at {} ms, never sent on and never answered, while {} id {}, written after it at {} ms, was accepted at {} ms; stdin stayed open until {left} ms",
        request.method,
        request.id.as_deref().unwrap_or(""),
        request.at_ms,
        later.method,
        later.id.as_deref().unwrap_or(""),
        later.at_ms,
        post.at_ms
    ))
}

/// Faults that defeat a bridge's reconnect and resend while they last.
const RECONNECT_FAULTS: &[&str] = &["withhold_replies", "post_reject", "post_reset", "link_hold"];
/// No reconnect's worth of time between the refusal and the client leaving was free of them.
const RECONNECT_DEFEATED: &str = "withheld replies or refused, reset or held POSTs left no time to reconnect before the client left";

/// Whether request `n`'s last POST was refused (an HTTP error, or its connection reset) and the
/// bridge then neither sent it again nor answered it, though the client kept stdin open a
/// reconnect's worth of time after (`recovery_ms`) and did not cancel it: what the user sees is
/// a call that hangs. (rmcp 3.11.0 drops a refusal whose JSON-RPC error has no id,
/// `src/service.rs:1805-1811`, which Streamable HTTP allows: seed-2026 hunt, sdk family.)
fn refused_then_silent(facts: &Facts<'_>, n: usize) -> Option<String> {
    let (request, story) = (&facts.requests[n], &facts.stories.of[n]);
    let last = story.posts.last().filter(|p| p.reset || p.status != 202)?;
    let left = facts.client_left_ms();
    if request.answered.is_some() || left < last.at_ms + facts.recovery_ms() || facts.cancelled_by_client(request) {
        return None;
    }
    // The bridge needs a reconnect's worth of time no fault defeats: a window of withheld
    // replies or refused, reset or held POSTs loses the new session's `initialize` or its
    // resend (sdk soak `v1.sdk.none.d6d2976814672a96`: after a bounce's 404 the bridge's
    // handshakes lost their answers to withheld replies, then a link hold held the next one
    // until after the client left).
    let mut windows: Vec<(u64, u64)> = facts
        .stories
        .global_faults
        .iter()
        .filter(|(name, start, end)| RECONNECT_FAULTS.contains(&name.as_str()) && *start <= left && *end >= last.at_ms)
        .map(|(_, start, end)| (*start, *end))
        .collect();
    windows.sort_unstable();
    let mut free_from = last.at_ms;
    let mut gap = false;
    for (start, end) in windows {
        gap |= start >= free_from + facts.recovery_ms();
        free_from = free_from.max(end);
    }
    if !(gap || left >= free_from + facts.recovery_ms()) {
        verdicts::excused(RECONNECT_DEFEATED);
        return None;
    }
    let how = if last.reset { "reset the connection of".to_string() } else { format!("answered HTTP {} to", last.status) };
    Some(format!(
        "{} id {}: the relayer {how} its POST at {} ms; the bridge never sent it again and never answered it (stdin open until {left} ms)",
        request.method,
        request.id.as_deref().unwrap_or(""),
        last.at_ms
    ))
}

/// Whether the bridge failed request `n` on a network error after it had read the relayer's
/// acceptance of a POST of it, before its deadline: the bridge's decision to give up, judged
/// (ORACLES.md §8), not excused by the resets that preceded it. Once the relayer accepted the
/// request its work runs (at most once, by its idempotency key), and its answer comes on a stream
/// or to a replay from the execution log; until the deadline's honest close-out it is owed.
/// The relayer's own refusal of a later POST (an HTTP status) or of the session (not
/// initialized), the client's leaving or cancelling, each still ends it.
fn gave_up_accepted_work(facts: &Facts<'_>, n: usize) -> Option<(usize, String)> {
    let (request, story) = (&facts.requests[n], &facts.stories.of[n]);
    let answer = request.answered.as_ref()?;
    let text = error_text(&answer.msg)?;
    if Facts::relayer_sent(story, &answer.msg).is_some() || !story.refusals.is_empty() || facts.cancelled_by_client(request) {
        return None;
    }
    let before = || story.posts.iter().filter(|p| p.index < answer.index);
    let reset = before().next_back().filter(|p| p.reset)?;
    let accepted = facts.acceptance_read_before_reset(story).filter(|p| p.index < reset.index)?;
    let refused_since = before().any(|p| p.index > accepted.index && !p.reset && p.status != 202);
    let deadline = request.at_ms + facts.call_timeout_ms;
    let left = facts.stories.client_eof.as_ref().is_some_and(|(_, eof, _)| *eof <= answer.at_ms + facts.slack_ms);
    if refused_since || left || answer.at_ms + facts.slack_ms >= deadline {
        return None;
    }
    Some((
        answer.index,
        format!(
            "{} id {}: the relayer accepted a POST of it at {} ms, and the bridge failed it at {} ms after a reset of a later POST ({} ms), {} ms before its deadline: {}",
            request.method,
            request.id.as_deref().unwrap_or(""),
            accepted.at_ms,
            answer.at_ms,
            reset.at_ms,
            deadline - answer.at_ms,
            text
        ),
    ))
}

/// The last `tools/list` reply the relayer sent before event `index`.
fn last_list_before<'f>(facts: &'f Facts<'_>, index: usize) -> Option<&'f Sent> {
    let lists = facts.requests.iter().zip(&facts.stories.of).filter(|(asked, _)| asked.method == "tools/list");
    lists.flat_map(|(_, story)| &story.sent).filter(|sent| sent.index < index).max_by_key(|sent| sent.index)
}

/// Whether `msg` is a response whose result is empty (but for `_meta`): `ping`'s answer.
fn empty_result(msg: &Value) -> bool {
    msg.get("result").and_then(Value::as_object).is_some_and(|result| result.keys().all(|key| key == "_meta"))
}

/// Every reply the relayer sent for a request the bridge still owed, on a stream that stayed open
/// long enough to carry it, reaches the client as that request's answer; and no request is
/// answered with a reply the relayer sent for another request.
pub fn reply_accounting(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let slack = facts.slack_ms;
    let eof = facts.stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    for (n, request) in facts.requests.iter().enumerate() {
        if !request.judged() {
            continue;
        }
        let story = &facts.stories.of[n];
        let answer = request.answered.as_ref();
        for sent in &story.sent {
            let released = facts.stories.released_ms(&sent.session, sent.at_ms, 2 * slack);
            // The stream it was written to carries it, or a resumption of that stream does. A
            // reply in a POST's JSON body has no stream of its own: the session's ending cuts it.
            let carrier = match facts.stories.carrier(&sent.session, &sent.stream, released, 2 * slack, eof) {
                Some(carrier) => carrier,
                None => facts.stories.stream(&sent.session).filter(|s| s.closed_ms.is_none_or(|closed| closed > released + 2 * slack)),
            };
            let arrives = released + 2 * slack;
            // Still owed when it arrived: the client had not read an answer yet, nor closed.
            let owed = answer.is_none_or(|a| a.at_ms > arrives) && arrives < eof;
            if answer.is_some_and(|a| same_reply(&a.msg, &sent.msg)) {
                verdicts::held();
                continue;
            }
            if !owed {
                continue;
            }
            let Some(stream) = carrier else {
                verdicts::excused("the stream carrying the reply, and each resumption of it before the client left, closed before it could arrive");
                continue;
            };
            // The client cancelled the request before the reply could reach it: MCP asks the
            // receiver not to answer and the client to ignore an answer that comes anyway, so
            // nothing is owed (a bridge may fail the request locally and drop the late reply,
            // as rmcp's client does: src/service.rs:1547-1553).
            if facts.cancelled_by_client_by(request, arrives) {
                verdicts::excused("the client cancelled the request");
                continue;
            }
            if answer.is_none() && arrives + facts.sweep_period_ms > facts.horizon_ms {
                continue;
            }
            let read = answer.map_or("nothing".to_string(), |a| format!("{} at {} ms", a.msg, a.at_ms));
            let id = request.id.as_deref().unwrap_or("");
            let detail = format!(
                "the relayer sent the reply to {} id {id} at {} ms on {}{} (a connection open from {} until {}{}), but the client read {read}",
                request.method,
                sent.at_ms,
                sent.session,
                if sent.stream.is_empty() { String::new() } else { format!(" stream {}", sent.stream) },
                stream.opened_ms,
                stream.closed_ms.map_or("the end".to_string(), |c| format!("{c} ms")),
                // The wire style the mock framed it in (line ends first: `cr` is a lone CR), for
                // telling a parser's loss from a bridge's.
                if stream.style.is_empty() { String::new() } else { format!(", framed {}", stream.style) },
            );
            found.push(facts.violation("reply_accounting", sent.index, detail));
            break;
        }
        // Never delivered as the answer to another request that reused the id.
        if let Some(answer) = answer {
            if Facts::relayer_sent(story, &answer.msg).is_some() {
                continue;
            }
            let other = facts.stories.of.iter().enumerate().find(|(m, other)| {
                *m != n && !other.action.is_empty() && Facts::relayer_sent(other, &answer.msg).is_some()
            });
            if let Some((m, _)) = other {
                let detail = format!(
                    "{} id {} was answered with the relayer's reply to another request (action {})",
                    request.method,
                    request.id.as_deref().unwrap_or(""),
                    facts.stories.of[m].action
                );
                found.push(facts.violation("reply_accounting", answer.index, detail));
            }
        }
    }
    capped(found)
}

/// Every error the client reads names what really happened to that request, checked against the
/// relayer's log: "the reply was lost" only if the relayer received it; "may have completed" only
/// if it may have (the relayer accepted it); "HTTP S" only if the relayer answered S; "could not
/// be reached" only if the relayer never accepted it; "the stream was down" only if it was.
pub fn truthful_endings(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        let (Some(answer), true) = (&request.answered, request.judged()) else { continue };
        let story = &facts.stories.of[n];
        if Facts::relayer_sent(story, &answer.msg).is_some() {
            continue;
        }
        let Some(text) = error_text(&answer.msg) else { continue };
        // Accepted and served: a POST the relayer accepted but then refused as not initialized
        // ran nothing and has no reply to lose, once the refusal reached the bridge (a late one
        // leaves the bridge knowing only that the relayer accepted it).
        let told = story.refusals.iter().filter(|r| facts.stories.released_ms(&r.session, r.at_ms, facts.slack_ms) + facts.slack_ms < answer.at_ms).count();
        let served = |before: usize| story.posts.iter().filter(|p| p.status == 202 && p.index < before).count() > told;
        let (accepted_before, accepted_ever) = (served(answer.index), served(usize::MAX));
        // An ending that names the session's `initialize` names that POST's status. What the
        // relayer logged before the client read its answer is what the trace has before it (the
        // trace is in causal order; times may be a tick apart).
        let inits = || facts.stories.all_posts.iter().filter(|p| p.4 == "initialize" && p.0 < answer.index);
        let posts = || story.posts.iter().filter(|p| p.index < answer.index);
        let last_status = if text.contains(INIT_FAILED) {
            inits().next_back().map(|p| if facts.stories.reset_after_admit.contains(&p.0) { 0 } else { p.5 })
        } else {
            posts().next_back().map(|p| p.status)
        };
        let mut lies = Vec::new();
        if text.contains("reply was lost") && !accepted_before {
            lies.push("the relayer never received it");
        }
        if text.contains("may have completed") && !accepted_ever {
            lies.push("the relayer never accepted it, so nothing can have completed");
        }
        if let Some(status) = text.split("HTTP ").nth(1).and_then(|rest| rest.get(..3)).and_then(|s| s.parse::<u64>().ok()) {
            if last_status != Some(status) {
                lies.push("the relayer answered its last POST otherwise");
            }
            if !names_the_cause(status, &text) {
                lies.push("it does not say what that status means for the user (credentials, rate limiting, a failing relayer)");
            }
        }
        if text.contains("never sent") && !story.posts.is_empty() {
            lies.push("the relayer received a POST of it");
        }
        if text.contains("could not be reached") && accepted_before {
            lies.push("the relayer had accepted it");
        }
        if text.contains("stream was down") {
            let down = (request.at_ms..=answer.at_ms).step_by(50).any(|t| !facts.stories.any_stream_open(t))
                || facts.stories.stream_ended_in(request.at_ms, answer.at_ms)
                || facts.stories.holds.iter().any(|h| h.start_ms <= answer.at_ms && h.end_ms >= request.at_ms);
            if !down {
                lies.push("a relayer stream was open all along");
            }
        }
        if let Some(said) = attempts_said(&text) {
            // The relayer's own count of the last run of tries: the final POST and the transient
            // refusals just before it on that session (tries it never saw only add to the count).
            // An `initialize` refused for good is tried again, on the same session, by a later
            // request: two runs may abut, so the count is capped at one full run.
            let tries = if text.contains(INIT_FAILED) {
                let reset = |p: &(usize, u64, String, String, String, u64)| facts.stories.reset_after_admit.contains(&p.0);
                last_run(inits().map(|p| (p.2.as_str(), if reset(p) { 0 } else { p.5 })).collect())
            } else {
                last_run(posts().map(|p| (p.session.as_str(), if p.reset { 0 } else { p.status })).collect())
            };
            if said < tries.min(POST_RETRIES + 1) {
                lies.push("the relayer received more tries of it in its last run");
            } else if said > POST_RETRIES + 1 {
                lies.push("the retry policy allows fewer tries");
            }
        }
        if text.contains("stdin closed") && facts.stories.client_eof.as_ref().is_none_or(|(_, eof, _)| *eof > answer.at_ms) {
            lies.push("the client had not closed stdin");
        }
        if let Some(lie) = verdicts::judging(lies.first()) {
            let id = request.id.as_deref().unwrap_or("");
            let detail = format!("{} id {id} was told {text:?}, but {lie}", request.method);
            found.push(facts.violation("truthful_endings", answer.index, detail));
        }
    }
    capped(found)
}

/// The number of tries an error says were made: "after N attempts" or "(N attempts)".
/// Whether an error naming HTTP `status` also says what it means for the user (MODEL.md §1.4:
/// a definitive rejection is answered with an error that names the cause): a credentials
/// problem for 401 and 403, rate limiting for 429, a failing relayer for a 5xx.
fn names_the_cause(status: u64, text: &str) -> bool {
    let words: &[&str] = match status {
        401 | 403 => &["credential", "token", "unauthori", "forbidden", "permission"],
        429 => &["rate limit", "too many requests"],
        500..=599 => &["failed", "failing", "unavailable", "server error"],
        _ => return true,
    };
    let text = text.to_lowercase();
    words.iter().any(|word| text.contains(word))
}

fn attempts_said(text: &str) -> Option<usize> {
    let (before, _) = text.split_once(" attempts")?;
    let digits = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// How many POSTs, by the relayer's log, the last run of tries of one message made: the final
/// one and the transient refusals (a network error, 429, 5xx) just before it on its session.
/// Each POST is `(session, status)`, 0 for a connection reset before the answer was read.
fn last_run(posts: Vec<(&str, u64)>) -> usize {
    let Some(&(session, _)) = posts.last() else { return 0 };
    let transient = |status: u64| matches!(status, 0 | 429 | 500..=599);
    let earlier = posts.iter().rev().skip(1);
    1 + earlier.take_while(|(s, status)| *s == session && transient(*status)).count()
}

/// A definitive rejection (401/403, or a 429/5xx that used up the retries) is answered promptly,
/// measured from the rejection, not at the call deadline.
pub fn prompt_rejection(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let bound = 2 * facts.slack_ms + 100;
    for (n, request) in facts.requests.iter().enumerate() {
        if !request.judged() {
            continue;
        }
        // The retries belong to one send: a run of transient refusals is definitive only when
        // all of them came on one session (a replay to a new session is a fresh send).
        // Network errors (0: the connection was reset before the relayer served the POST) on a
        // request the relayer accepted before say nothing about its work: it stays owed.
        let mut transient = 0;
        let mut session = "";
        let mut accepted = false;
        let definitive = facts.stories.of[n].posts.iter().find(|post| {
            if post.session != session {
                transient = 0;
                session = &post.session;
            }
            // A reset connection: the bridge read a network error, not the relayer's status
            // (which, if 202, still means the work runs).
            accepted |= post.reset && post.status == 202;
            match if post.reset { 0 } else { post.status } {
                401 | 403 => return true,
                0 if accepted => transient = 0,
                0 | 429 | 500..=599 => transient += 1,
                202 => (transient, accepted) = (0, true),
                _ => transient = 0,
            }
            transient > POST_RETRIES
        });
        let Some(post) = definitive else { continue };
        // The HTTP answer reaches the bridge when a link hold that met it in transit ends (never
        // before the refusal: every hold counted ends after it).
        let held_until = facts
            .stories
            .holds
            .iter()
            .filter(|h| !h.older_streams_only && h.start_ms <= post.at_ms + facts.slack_ms && post.at_ms <= h.end_ms)
            .map(|h| h.end_ms)
            .max()
            .unwrap_or(post.at_ms);
        // The session's stream ended as the answer came (when a hold released it, if one held
        // it: soak v1.relay.none.ddcb45352bac5f40, whose stream the hold had silenced into its
        // idle bound): the bridge drops a dead session's POSTs with it, and the request goes to
        // the next session (to be answered there).
        if facts.stories.stream(&post.session).and_then(|s| s.closed_ms).is_some_and(|closed| closed <= held_until + facts.slack_ms) {
            verdicts::excused(REFUSED_SESSION_ENDED);
            continue;
        }
        let late = match &request.answered {
            Some(answer) if answer.at_ms <= held_until + bound || answer.at_ms < post.at_ms => {
                verdicts::held();
                continue;
            }
            Some(answer) => format!("answered {} ms after", answer.at_ms - post.at_ms),
            None if post.at_ms + bound > facts.horizon_ms => continue,
            None => "never answered after".to_string(),
        };
        let id = request.id.as_deref().unwrap_or("");
        let detail = format!("{} id {id}: {late} the relayer's definitive HTTP {} at {} ms (bound {bound} ms)", request.method, post.status, post.at_ms);
        found.push(facts.violation("prompt_rejection", post.index, detail));
    }
    found.extend(init_refusals_answered(facts, bound));
    capped(found)
}

/// The session a definitive refusal came on ended as it came, taking its POSTs (and the pump
/// waiting on them) along: the request goes to the next session, not to a prompt answer.
const REFUSED_SESSION_ENDED: &str = "the refused POST's session ended as its refusal came";

/// A session's `initialize` refused for good leaves nothing to send the requests waiting on it
/// to: each one the client had sent and the relayer had not accepted is answered within `bound`
/// of the refusal (ARCHITECTURE.md: the bridge answers them with that refusal), not at its
/// deadline. Read from the relayer's log (the `initialize` POSTs, their statuses and spacing)
/// and the client's stdio.
fn init_refusals_answered(facts: &Facts<'_>, bound: u64) -> Vec<Violation> {
    let mut found = Vec::new();
    for (index, at, session, status) in definitive_init_refusals(facts) {
        // A stream that ended as the answer came takes the session (and its pump) with it; a
        // link hold delays the answer itself.
        let closed = facts.stories.stream(&session).and_then(|s| s.closed_ms).is_some_and(|c| c <= at + facts.slack_ms);
        let held = facts.stories.holds.iter().any(|h| !h.older_streams_only && h.start_ms <= at + facts.slack_ms && at <= h.end_ms);
        // One verdict per request the refusal left waiting, excused alike by what met the refusal.
        let excuse = if closed {
            Some(REFUSED_SESSION_ENDED)
        } else if held {
            Some("a link hold delayed the refused initialize's answer")
        } else {
            None
        };
        if excuse.is_none() && at + bound > facts.horizon_ms {
            continue;
        }
        for (n, request) in facts.requests.iter().enumerate() {
            if !left_waiting(facts, n, request, at) {
                continue;
            }
            if let Some(mechanism) = excuse {
                verdicts::excused(mechanism);
                continue;
            }
            if request.answered.as_ref().is_some_and(|a| a.at_ms <= at + bound) {
                verdicts::held();
                continue;
            }
            let late = request.answered.as_ref().map_or("never answered".to_string(), |a| format!("answered {} ms", a.at_ms - at));
            let detail = format!(
                "{} id {}: {late} after session {session}'s initialize was refused for good (HTTP {status} at {at} ms, bound {bound} ms)",
                request.method,
                request.id.as_deref().unwrap_or("")
            );
            found.push(facts.violation("prompt_rejection", index, detail));
        }
    }
    found
}

/// Whether request `n` waited on a session's `initialize` refused for good at `at`: the client had
/// sent it, was not yet answered, and the relayer had not accepted it.
fn left_waiting(facts: &Facts<'_>, n: usize, request: &Request, at: u64) -> bool {
    let waiting = request.judged() && request.at_ms + facts.slack_ms < at && request.answered.as_ref().is_none_or(|a| a.at_ms > at);
    let accepted = facts.stories.of[n].posts.iter().any(|p| p.status == 202 && p.at_ms <= at + facts.slack_ms);
    waiting && !accepted
}

/// The `initialize` POSTs the retry policy gives up on, by the relayer's log: a 401/403, or the
/// last of `POST_RETRIES + 1` transient refusals on one session spaced by the backoffs (250, then
/// 500 ms), the last a 429 or 5xx the bridge read (a network error there lets the lifecycle go
/// on). A POST that does not come one backoff after the one before starts a new run: a try the
/// relayer never logged (it was down) leaves its run unjudged rather than miscounted.
/// `(index, at, session, status)`.
fn definitive_init_refusals(facts: &Facts<'_>) -> Vec<(usize, u64, String, u64)> {
    let mut refusals = Vec::new();
    let mut run: Vec<u64> = Vec::new();
    let mut session = "";
    let inits = facts.stories.all_posts.iter().filter(|p| p.4 == "initialize");
    for (index, at, s, _, _, status) in inits {
        let next_try = run.last().is_some_and(|last| {
            let (wait, gap) = (RETRY_BASE_MS << (run.len() - 1), at.saturating_sub(*last));
            s == session && wait <= gap + facts.slack_ms && gap <= wait + 3 * facts.slack_ms + CONNECT_MS
        });
        if !next_try {
            (run, session) = (Vec::new(), s.as_str());
        }
        run.push(*at);
        let status = if facts.stories.reset_after_admit.contains(index) { 0 } else { *status };
        match status {
            401 | 403 => refusals.push((*index, *at, session.to_string(), status)),
            0 | 429 | 500..=599 if run.len() <= POST_RETRIES => continue,
            429 | 500..=599 => refusals.push((*index, *at, session.to_string(), status)),
            _ => {}
        }
        run.clear();
    }
    refusals
}

/// No work after an ending: the relayer receives no POST of a request whose answer the client has
/// already read, and executes no write after the client was told it failed, unless a link hold
/// kept a POST sent earlier in the network.
pub fn no_work_after_ending(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (n, request) in facts.requests.iter().enumerate() {
        let (Some(answer), true) = (&request.answered, request.judged()) else { continue };
        let story = &facts.stories.of[n];
        let cutoff = answer.at_ms + 2 * facts.slack_ms;
        let held = |at: u64| facts.stories.holds.iter().any(|h| !h.older_streams_only && h.start_ms <= at && h.end_ms + facts.slack_ms >= answer.at_ms);
        if let Some(post) = story.posts.iter().find(|p| p.at_ms > cutoff && !held(p.at_ms)) {
            let detail = format!(
                "the relayer received a POST of {} id {} at {} ms, after the client read its answer at {} ms",
                request.method,
                request.id.as_deref().unwrap_or(""),
                post.at_ms,
                answer.at_ms
            );
            found.push(facts.violation("no_work_after_ending", post.index, detail));
            continue;
        }
        let failed = error_text(&answer.msg).is_some() && Facts::relayer_sent(story, &answer.msg).is_none();
        if let Some((index, at)) = story.execs.iter().find(|(_, at)| failed && *at > cutoff && !held(*at)) {
            let detail = format!("action {} executed at {at} ms, after the client was told at {} ms that it failed", story.action, answer.at_ms);
            found.push(facts.violation("no_work_after_ending", *index, detail));
            continue;
        }
        // Nothing came after the ending, or only what a link hold kept in the network.
        if story.posts.iter().any(|p| p.at_ms > cutoff) || story.execs.iter().any(|(_, at)| failed && *at > cutoff) {
            verdicts::excused("a link hold kept a POST of it in the network past its ending");
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// A `notifications/cancelled` the client sends for a request it still awaits must reach the
/// relayer naming that request as the relayer knows it. The bridge sends every request upstream
/// under its own id, so a cancellation passed on with the client's id names nothing the relayer
/// ran: the work goes on although the user stopped it. Read from the client's stdio (the cancel,
/// and whether the request was still unanswered) and the relayer's log (the requests it accepted,
/// each with the client's id it carries, and the cancellations it received). A cancellation is
/// the client's by the step it stamps in `_meta`, which the relayer logs with the POST that
/// carried it (`rpc.cancel` comes in that POST's handler): whether its request was still owed
/// is read at that very write, not at the client's latest cancellation of the id (an earlier
/// one for a request already answered, sent as written, may reach the relayer after the client
/// reused the id and cancelled again). Without a stamp, the latest cancellation of the id.
pub fn cancellations_name_their_request(facts: &Facts<'_>) -> Vec<Violation> {
    // Whether a request of `id` was sent before event `at` and not answered before it, nor
    // answered by the relayer (a cancellation that crosses the reply is moot: the request has
    // completed, and MCP lets the receiver ignore it).
    let owed_at = |id: &str, at: usize| {
        facts.requests.iter().enumerate().any(|(n, r)| {
            let replied = facts.stories.of[n].sent.iter().any(|sent| sent.index < at);
            r.judged() && r.id.as_deref() == Some(id) && r.index < at && r.answered.as_ref().is_none_or(|a| a.index > at) && !replied
        })
    };
    // Per request id, whether the client's latest cancellation of it came while it was owed;
    // per step the client stamped, whether that cancellation's request was owed.
    let mut cancelled: BTreeMap<String, bool> = BTreeMap::new();
    let mut owed_by_step: BTreeMap<String, bool> = BTreeMap::new();
    // The relayer's last POST: `(session, note)`. A cancellation is logged in its POST's handler.
    let mut carried: Option<(String, String)> = None;
    // Client id -> the upstream ids the relayer accepted it under, so far.
    let mut upstream: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        match (event.host.as_str(), event.kind.as_str()) {
            (host::CLIENT, kind::MCP_SEND) => {
                let Some((msg, id)) = super::story::cancellation(event) else { continue };
                let owed = owed_at(&id, index);
                if let Some(step) = note_step(&msg) {
                    owed_by_step.insert(step.to_string(), owed);
                }
                cancelled.insert(id, owed);
            }
            (host::RELAYER, kind::HTTP_POST) => {
                carried = Some((event.text("session"), event.text("note")));
                if super::story::post_status(event) == 202 && !event.text("id").is_empty() {
                    upstream.entry(event.text("client_id")).or_default().insert(event.text("id"));
                }
            }
            (host::RELAYER, kind::RPC_CANCEL) => {
                let named = event.text("request");
                let Some(known) = upstream.get(&named).filter(|ids| !ids.contains(&named)) else {
                    // Named as the relayer knows a request it accepted: held.
                    if upstream.values().any(|ids| ids.contains(&named)) {
                        verdicts::held();
                    }
                    continue;
                };
                let note = carried.as_ref().filter(|(session, _)| *session == event.text("session")).map(|(_, note)| note);
                let owed = match note.and_then(|note| owed_by_step.get(note)) {
                    Some(owed) => *owed,
                    None => cancelled.get(&named) == Some(&true),
                };
                if !owed {
                    continue;
                }
                let known: Vec<&str> = known.iter().map(String::as_str).collect();
                let detail = format!(
                    "the client cancelled its request {named} while awaiting it; the relayer received a \
                     cancellation naming {named}, but knows that request only as {}: it cancels nothing",
                    known.join(", ")
                );
                found.push(facts.violation("cancellations_name_their_request", index, detail));
            }
            _ => {}
        }
    }
    capped(found)
}

/// Every notification the client sent reaches the relayer (a POST it accepted) unless the client
/// closed first: a refusal, for good or past the retries, is no excuse (the bridge keeps it until
/// the relayer accepts it). The relayer's POSTs of one method come in the client's order, each
/// notification's as a run: refusals (429, 5xx, 401) and 404s (sent again to the next session)
/// until one is accepted.
/// `notifications/initialized` is also sent by the bridge itself to every session: any accepted
/// one after the client's counts. Order makes the check sharp: a notification the relayer never
/// accepted, while it accepted a message the client wrote later, was dropped (the outbox sends
/// in the client's order), even if the client closed stdin soon after.
pub fn notifications_delivered(facts: &Facts<'_>) -> Vec<Violation> {
    let eof = facts.stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    // After a fault the bridge may still be backing off before its next stream (up to 15 s) or
    // waiting out a silent one: the outbox drains once it reconnects. A bridge's call deadline
    // has no part in it (with none, as rmcp's, it would cover the run).
    let settle = facts.recovery_ms();
    // The bridge's time to deliver runs from the last effect before the client left that held
    // its way to the relayer (`held_off`), named by what it did.
    let held_off = notes_held_off(facts, eof);
    let posts = &facts.stories.all_posts;
    // The bridge's first contact with the relayer: a stream it opened, or a POST accepted.
    let opened = facts.stories.streams.iter().map(|s| s.opened_ms);
    let first_contact = opened.chain(posts.iter().filter(|p| (200..300).contains(&p.5)).map(|p| p.1)).min();
    // Per method: the next POST not yet accounted for.
    let mut next: BTreeMap<String, usize> = BTreeMap::new();
    // The steps of the client's notifications the relayer accepted, and the client's earliest
    // message (by its write's index) the relayer accepted after each write.
    let accepted: BTreeSet<String> = facts.trace.of_kind(kind::HTTP_POST).filter(|(_, e)| super::story::post_status(e) == 202).map(|(_, e)| e.text("note")).filter(|note| !note.is_empty()).collect();
    let note_writes: Vec<(usize, String)> = facts
        .trace
        .of_kind(kind::MCP_SEND)
        .filter(|(_, e)| e.host == host::CLIENT)
        .filter_map(|(index, e)| note_step(&message(e)).map(|step| (index, step.to_string())))
        .collect();
    let accepted_after = |written: usize| {
        let request = facts.requests.iter().zip(&facts.stories.of).find(|(r, story)| r.index > written && story.posts.iter().any(|p| p.status == 202));
        let note = note_writes.iter().find(|(index, step)| *index > written && accepted.contains(step));
        match (request, note) {
            (Some((r, _)), Some((n, step))) if n < &r.index => Some(format!("notification (step {step})")),
            (Some((r, _)), _) => Some(format!("{} id {}", r.method, r.id.as_deref().unwrap_or("?"))),
            (None, Some((_, step))) => Some(format!("notification (step {step})")),
            (None, None) => None,
        }
    };
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        if event.host != host::CLIENT || event.kind != kind::MCP_SEND {
            continue;
        }
        let msg = message(event);
        let Some(method) = msg.get("method").and_then(Value::as_str) else { continue };
        if msg.get("id").is_some() || wire::predict(&event.text("msg")) != wire::Expect::Silent {
            continue;
        }
        let of_method = |(_, at, _, id, m, _): &&(usize, u64, String, String, String, u64)| {
            id.is_empty() && m == method && at + facts.slack_ms >= event.at_ms
        };
        let delivered = if method == "notifications/initialized" {
            posts.iter().filter(of_method).any(|p| p.5 == 202)
        } else {
            // A notification the client stamped with its step is told by its own POSTs; others
            // by the order of their method's POSTs that carry no step. So is a stamped one that
            // the bridge forwarded rebuilt, without its `_meta` (mcp-proxy 0.13.0 sends a
            // client's notifications/progress upstream as a new notification of the same
            // token): it reached the server all the same. Refusals are no excuse: transient ones
            // call for a retry, and a bridge that gives up on a notification after its retries,
            // or on a refusal for good, loses it with nobody told (ORACLES.md §8). It keeps it
            // until the relayer accepts it or the client leaves.
            let note = |post: &(usize, u64, String, String, String, u64)| facts.trace.events[post.0].text("note");
            let step = note_step(&msg).map(Value::to_string).filter(|step| posts.iter().any(|post| note(post) == *step));
            let mine = |post: &&(usize, u64, String, String, String, u64)| match &step {
                Some(step) => note(post) == *step,
                None => of_method(post) && note(post).is_empty(),
            };
            let start = if step.is_some() { 0 } else { next.get(method).copied().unwrap_or(0) };
            let accepted_at = posts.iter().enumerate().skip(start).find(|(_, post)| mine(post) && post.5 == 202).map(|(k, _)| k);
            if step.is_none() {
                // Unstamped notifications of a method are matched in order: the next one's
                // POSTs begin after this one's acceptance.
                next.insert(method.to_string(), accepted_at.map_or(start, |k| k + 1));
            }
            accepted_at.is_some()
        };
        // The outbox keeps the client's order across sessions: a notification not yet accepted
        // goes before anything the client wrote after it. One the relayer never accepted while
        // it accepted a message written later was dropped, however soon the client closed.
        if let Some(later) = note_step(&msg).filter(|_| !delivered).and_then(|_| accepted_after(index)) {
            let detail = format!("notification {method} sent at {} ms never reached the relayer, which accepted the client's later {later}", event.at_ms);
            found.push(facts.violation("notifications_delivered", index, detail));
            continue;
        }
        if delivered {
            verdicts::held();
            continue;
        }
        // After an effect of a fault, a reconnect's time from the later of the write and that
        // effect, named by its mechanism. With none, nothing stood between the note and the
        // relayer but the link: a healthy delivery's time, not a reconnect's (supergateway 3.4.3
        // wrote every notification back to stdout and sent none; a client that closed 10 s
        // later was excused), from the bridge's first contact if the note came before it (its
        // first connect may come before the relayer listens, and back off); a reconnect's time
        // if no contact came at all.
        let (from, budget, mechanism) = match (held_off, first_contact) {
            (Some((at, mechanism)), _) => (at.max(event.at_ms), settle, mechanism),
            (None, None) => (event.at_ms, settle, NOTE_NO_CONTACT),
            (None, Some(up)) if up > event.at_ms => (up, facts.delivery_ms(), NOTE_BEFORE_CONTACT),
            (None, Some(_)) => (event.at_ms, facts.delivery_ms(), NOTE_WRITTEN_LATE),
        };
        if eof < from + budget {
            verdicts::excused(mechanism);
            continue;
        }
        // The run ended (the client still writing) before the bridge had that time after the
        // faults: nothing to judge (v1.sdk.none.5351f87dd73dea51).
        if eof == u64::MAX && facts.horizon_ms > 0 && facts.horizon_ms < from + budget {
            continue;
        }
        let detail = format!("notification {method} sent at {} ms never reached the relayer (stdin closed at {eof} ms)", event.at_ms);
        found.push(facts.violation("notifications_delivered", index, detail));
    }
    capped(found)
}

/// No fault acted before the client left, and it left within a healthy delivery's time of
/// writing the note (`Facts::delivery_ms`): the bridge's POST may still have been on its way.
const NOTE_WRITTEN_LATE: &str = "the client left within a healthy delivery's time of writing it (no fault acted before it left)";

/// No fault acted before the client left, and it wrote the note before the bridge's first
/// contact with the relayer: it left within a healthy delivery's time of that contact.
const NOTE_BEFORE_CONTACT: &str = "the client left within a healthy delivery's time of the bridge's first contact with the relayer (no fault acted before it left)";

/// No fault acted, and the bridge never reached the relayer before the client left: it left
/// within a reconnect's time of writing the note (the bridge's connects may be backing off).
const NOTE_NO_CONTACT: &str = "the client left within a reconnect's time of writing it, the bridge not yet in contact with the relayer (no fault acted before it left)";

/// The last effect, before the client left at `eof`, that held a bridge's notifications off the
/// relayer, and its mechanism: when it stopped acting. Only these do, each by what it did:
/// - a POST the relayer refused or a reset cut inside a `post_reject`/`post_reset` window (the
///   outbox sends in order, so any POST's refusal holds what queues behind it): the refusal
///   itself, observed, not the window it fell in (a window that refused nothing held nothing);
/// - `stream_eof`, `stream_flap`, `relayer_bounce`: a stream closed or connects failed until
///   the heal (a restart's: the relayer's next start), if the relayer ended a stream or went
///   down inside the window (observed: a cut that found no stream cut nothing);
/// - `stream_stall`: the bridge's close of a stream the stall silenced (its watchdog acting on
///   the silence, observed at the relayer), not the stall's window: the POSTs go on meanwhile;
/// - `link_hold`: bytes both ways held until the window's end (what it held is seen only as it
///   ends, if at all);
/// - the answer to a session's `initialize` lost (`swallow_reply`, `withhold_replies`, or the
///   stream carrying it closed unwritten) or held back (`late_reply`): the handshake the notes
///   wait behind, from the fault's firing (`Stories::handshake_lost`, `handshake_late`);
/// - a POST answered 404 (`session_lost`): the reconnect it calls for, from the answer.
///
/// Otherwise `withhold_replies` holds only replies, and `stdin_eof` is the client's own leaving:
/// neither stands between a notification and the relayer. (Until this round the end of any fault or
/// refusal window that began before EOF restarted the settle time, with one label for all.)
/// A cut still open at EOF (a flap to the end, relay soak v1.relay.none.e48fc9a2256474a3)
/// leaves no time at all.
fn notes_held_off(facts: &Facts<'_>, eof: u64) -> Option<(u64, &'static str)> {
    let refusals = facts.stories.refusal_windows.iter().filter(|(_, start, _)| *start <= eof);
    let refused = refusals
        .flat_map(|(_, start, end)| facts.stories.all_posts.iter().filter(move |p| p.5 != 202 && *start <= p.1 && p.1 <= end + facts.slack_ms))
        .map(|p| p.1)
        .filter(|at| *at <= eof)
        .max()
        .map(|at| (at, "the client left within a reconnect's time of a POST the relayer refused or a reset cut"));
    // The windows of `names` begun before EOF: (start, heal).
    let windows = |names: &'static [&'static str]| {
        let faults = facts.stories.global_faults.iter().filter(move |(name, start, _)| names.contains(&name.as_str()) && *start <= eof);
        faults.map(|(name, start, end)| (*start, facts.healed_ms(name, *start, *end)))
    };
    // A cut acted only if the relayer cut a stream or went down inside its window: one that
    // found nothing to cut held nothing.
    let cut_something = |&(start, healed): &(u64, u64)| {
        let inside = |at: u64| start <= at && at <= healed + facts.slack_ms;
        facts.stories.streams.iter().any(|s| s.cut_ms().is_some_and(inside)) || facts.stories.restarts.iter().any(|(killed, _)| inside(*killed))
    };
    let cut = windows(CUTTING_FAULTS).filter(cut_something).map(|(_, healed)| healed).max();
    let cut = cut.map(|at| (at, "the client left within a reconnect's time of the heal of a fault that closed its streams or failed its connects"));
    // A stall holds a stream's bytes, never the POSTs: it holds notifications off only through
    // the bridge giving the silent stream up (the relayer sees the bridge close a stream open
    // before the stall, inside it or within a watchdog's notice of its end), and from that close
    // on, while the new stream and session come up. A stall the watchdog never acted on held none.
    let noticed_ms = facts.silence_noticed_ms();
    let given_up = |(start, healed): (u64, u64)| {
        let closes = facts.stories.streams.iter().filter(move |s| s.closed_by_client && s.opened_ms < start);
        closes.filter_map(|s| s.closed_ms).filter(move |at| start <= *at && *at <= healed + noticed_ms)
    };
    let stalled = windows(&["stream_stall"]).flat_map(given_up).filter(|at| *at <= eof).max();
    let stalled = stalled.map(|at| (at, "the client left within a reconnect's time of the bridge giving up a stream a stall had silenced"));
    let held = windows(&["link_hold"]).map(|(_, healed)| healed).max();
    let held = held.map(|at| (at, "the client left within a reconnect's time of the end of a held link that kept its bytes"));
    // A session's handshake answer a fault destroyed or held back: nothing goes to the session
    // before its handshake ends, and a lost answer has the bridge wait out its own handshake
    // deadline and start another (sdk seed 2026, v1.sdk.none.283d234ef48ff9f4), as
    // `user_outcomes` has it.
    let lost = facts.stories.handshake_lost.iter().chain(&facts.stories.handshake_late).copied().filter(|at| *at <= eof).max();
    let lost = lost.map(|at| (at, "the client left within a reconnect's time of a fault destroying or holding back the answer to the session's handshake"));
    // A POST the relayer answered 404 (it no longer knew the session: `session_lost`): the
    // bridge must reconnect (MODEL.md §1.4) before anything reaches the relayer again (relay
    // seed 0x7dfaf32, v1.relay.none.18a4177d83042bd5).
    let gone = facts.stories.all_posts.iter().filter(|p| p.5 == 404 && p.1 <= eof).map(|p| p.1).max();
    let gone = gone.map(|at| (at, "the client left within a reconnect's time of the relayer answering 404 for a session it no longer knew"));
    [refused, cut, stalled, held, lost, gone].into_iter().flatten().max_by_key(|(at, _)| *at)
}

/// A notification the relayer accepted carries the `_meta` the client wrote: the step the client
/// stamped into it arrives with it. A policy (a bridge may rebuild a notification, as
/// mcp-proxy 0.13.0 does with progress, and `notifications_delivered` still counts that as
/// delivered); a bridge whose profile promises to forward notifications as written is held to
/// it. Judged for each stamped notification once the relayer accepted a notification of its
/// method written at or after it: if none of the accepted ones carries its stamp, its `_meta`
/// was dropped on the way (rmcp 3.11.0's `NotificationContext::meta` is empty,
/// src/service.rs:1775-1776).
pub fn notifications_keep_meta(facts: &Facts<'_>) -> Vec<Violation> {
    let accepted: Vec<(u64, String, String)> = facts
        .trace
        .of_kind(kind::HTTP_POST)
        .filter(|(_, e)| e.text("id").is_empty() && super::story::post_status(e) == 202)
        .map(|(_, e)| (e.at_ms, e.text("method"), e.text("note")))
        .collect();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::MCP_SEND).filter(|(_, e)| e.host == host::CLIENT) {
        let msg = message(event);
        let (Some(method), Some(step)) = (msg.get("method").and_then(Value::as_str), note_step(&msg)) else { continue };
        if msg.get("id").is_some() {
            continue;
        }
        let step = step.to_string();
        let of_method: Vec<&(u64, String, String)> = accepted.iter().filter(|(at, m, _)| m == method && at + facts.slack_ms >= event.at_ms).collect();
        if of_method.is_empty() {
            continue;
        }
        if of_method.iter().any(|(_, _, note)| *note == step) {
            verdicts::held();
            continue;
        }
        if of_method.iter().all(|(_, _, note)| !note.is_empty()) {
            // Every one the relayer took carries another step: this one was not delivered at
            // all, which `notifications_delivered` judges.
            continue;
        }
        let detail = format!("notification {method} sent at {} ms reached the relayer without the _meta the client wrote (step {step})", event.at_ms);
        found.push(facts.violation("notifications_keep_meta", index, detail));
    }
    capped(found)
}

/// Reconnect discipline as the relayer sees it. After `k` consecutive streams that each ended
/// within `SHORT_STREAM_MS` of opening, the next stream opens no sooner than `backoff(k-1)`
/// after the last one ended, so a relayer that keeps accepting and dropping streams never sees
/// a reconnect storm. And it opens no later than the longest backoff the streams allow: none
/// after a stream that lived `STABLE_STREAM_MS` (the bridge reconnects at once), `backoff(j-1)`
/// after `j` consecutive streams that may each have counted as failed. A stream that ended
/// while the client still had stdin open is followed by another within that bound: a bridge
/// that stops reconnecting leaves every later request without a session. A connect can fail
/// unseen (before the relayer first listens, while it is down, while the link is held), so
/// lateness is judged only once a stream that lived `STABLE_STREAM_MS` has reset the bridge's
/// count since then. A stream the bridge closed itself (`by=client`: after orphaned replies, for
/// a new `initialize`) is its own decision, not a connect that failed: it starts no backoff
/// (MODEL.md §1: after two orphaned calls the bridge reconnects; the attempt resets on success).
pub fn reconnect_discipline(facts: &Facts<'_>) -> Vec<Violation> {
    let (mut short, mut maybe_short) = (0u64, 0u64);
    let mut counted = false;
    let mut found = Vec::new();
    let streams = &facts.stories.streams;
    let eof = facts.stories.client_eof.as_ref().map_or(facts.horizon_ms, |(_, at, _)| *at);
    let open_index = |session: &str| {
        let open = facts.trace.events.iter().position(|e| e.kind == kind::STREAM_OPEN && e.text("session") == session);
        open.unwrap_or(0)
    };
    for (n, stream) in streams.iter().enumerate() {
        // The bridge may learn of a close only when a stall or link hold lets the bytes through
        // (the stream lived longer for the bridge): shortness counts from then, the wait from
        // the close itself (the bridge cannot have started waiting earlier).
        let Some(closed) = stream.closed_ms else { break };
        let seen = facts.stories.released_ms(&stream.session, closed, facts.slack_ms);
        let lived = seen.saturating_sub(stream.opened_ms);
        let failed = lived < SHORT_STREAM_MS || (lived + facts.slack_ms < STABLE_STREAM_MS && !facts.close_maybe_chosen(stream.opened_ms, closed));
        short = if failed && !stream.closed_by_client { short + 1 } else { 0 };
        // For the longest wait, the shortest life the bridge may have seen.
        let lived_at_least = closed.saturating_sub(stream.opened_ms);
        maybe_short = if lived_at_least < STABLE_STREAM_MS + facts.slack_ms { maybe_short + 1 } else { 0 };
        counted |= maybe_short == 0;
        let next = streams.get(n + 1);
        if let Some(next) = next.filter(|_| short > 0) {
            let (wait, waited) = (backoff_ms(short - 1), next.opened_ms.saturating_sub(closed));
            if waited + facts.slack_ms < wait {
                let detail = format!("stream {} opened {waited} ms after {short} short-lived streams; the backoff is {wait} ms", next.session);
                found.push(facts.violation("reconnect_discipline", open_index(&next.session), detail));
            }
        }
        let longest = if maybe_short > 0 { backoff_ms(maybe_short - 1) } else { 0 };
        let due = seen + longest + 2 * facts.slack_ms + CONNECT_MS;
        let opened = next.map_or(u64::MAX, |s| s.opened_ms);
        let unseen = facts.unseen_connect(stream.opened_ms, due.min(opened));
        if unseen {
            counted = false;
        }
        if opened <= due {
            verdicts::held();
            continue;
        }
        if due >= eof {
            continue;
        }
        // Connects may have failed unseen since a stream last lived 2 s: the count of failures,
        // and so the backoff, is unknown, but it is capped, and a connect pending in a fault
        // lands when it heals.
        let longest = if counted {
            longest
        } else {
            let capped = facts.reconnect_due_past(UNSEEN_CONNECT_FAULTS, stream.opened_ms, seen + CONNECT_MS + MAX_BACKOFF_MS + 2 * facts.slack_ms);
            if opened <= capped {
                verdicts::excused(if unseen {
                    "relayer_bounce or link_hold may have failed a connect unseen; it came within the capped backoff of the heal"
                } else {
                    "no stream has lived 2 s since a connect could fail unseen; it came within the capped backoff"
                });
                continue;
            }
            if capped >= eof {
                continue;
            }
            MAX_BACKOFF_MS
        };
        let detail = match next {
            Some(next) => format!(
                "stream {} opened {} ms after stream {} ended; after {maybe_short} streams that may have failed the backoff is at most {longest} ms",
                next.session,
                next.opened_ms - seen,
                stream.session
            ),
            None => format!("no stream followed stream {}, which ended at {closed} ms, although the client kept stdin open until {eof} ms", stream.session),
        };
        let index = next.map_or_else(|| facts.trace.events.len().saturating_sub(1), |s| open_index(&s.session));
        found.push(facts.violation("reconnect_discipline", index, detail));
    }
    capped(found)
}

/// How many closed-out ids the bridge must still remember at `eof`: the close-outs the client
/// read surely inside the retention window (the sweeper forgets on its ticks) whose id it has
/// not reused since.
fn closed_out_kept(facts: &Facts<'_>, eof: u64) -> u64 {
    let margin = facts.sweep_period_ms + 2 * facts.slack_ms;
    let closed_out = |a: &&Answer| error_text(&a.msg).is_some_and(|text| text.contains(CLOSE_OUT));
    let kept = facts.requests.iter().enumerate().filter(|(n, request)| {
        let reused = facts.requests[n + 1..].iter().any(|later| later.id == request.id && later.at_ms <= eof);
        let answer = request.answered.as_ref().filter(closed_out);
        !reused && answer.is_some_and(|a| a.at_ms + facts.slack_ms <= eof && a.at_ms + CLOSED_OUT_RETENTION_MS >= eof + margin)
    });
    kept.count() as u64
}

/// Quiescence: when the client closes stdin after everything settled, the bridge's end-of-run
/// resource report holds only entries inside their retention windows, nothing owed and nothing
/// waiting, its tasks are the idle set, and the report matches what the boundaries show (the
/// requests the client still waits on; the relayer's open streams).
pub fn quiescence(facts: &Facts<'_>) -> Vec<Violation> {
    let Some((_, eof, reason)) = &facts.stories.client_eof else { return Vec::new() };
    let report = facts.trace.events.iter().enumerate().find(|(_, e)| e.host == host::BRIDGE && e.kind == kind::BRIDGE_REPORT);
    let Some((index, report)) = report else {
        if facts.trace.events.iter().any(|e| e.kind == kind::BRIDGE_EXIT) {
            return vec![facts.violation("quiescence", 0, "the bridge exited without its resource report".to_string())];
        }
        return Vec::new();
    };
    let waiting = facts.requests.iter().filter(|r| r.id.is_some() && r.answered.as_ref().is_none_or(|a| a.at_ms + facts.slack_ms >= *eof)).count() as u64;
    let mut problems = Vec::new();
    if report.num("inflight") > waiting {
        problems.push(format!("reports {} requests in flight while the client waits on {waiting}", report.num("inflight")));
    }
    // The sweeper forgets expired ids on its ticks: one may outlive the window by a period.
    if report.num("closed_out_age_ms") > CLOSED_OUT_RETENTION_MS + facts.sweep_period_ms + facts.slack_ms {
        problems.push(format!("keeps a closed-out id {} ms old", report.num("closed_out_age_ms")));
    }
    // It remembers every close-out the client read surely inside the retention window, unless the
    // client has reused its id since (one it forgot too early is what `closed_out_age_ms` cannot
    // show).
    let (must, remembered) = (closed_out_kept(facts, *eof), report.num("closed_out"));
    if remembered < must {
        problems.push(format!("remembers {remembered} closed-out ids, while the client read {must} close-outs inside the retention window"));
    }
    if report.num("suppressed_age_ms") > facts.call_timeout_ms + facts.sweep_period_ms + facts.slack_ms {
        problems.push(format!("keeps a suppressed id {} ms old", report.num("suppressed_age_ms")));
    }
    // Settled: the client closed on schedule, after heal and recovery, and every request it
    // sent was due (deadline plus a sweep) before it closed.
    let due = facts.call_timeout_ms + facts.sweep_period_ms + 2 * facts.slack_ms;
    let settled = reason == "end"
        && facts.stories.heal_ms.is_none_or(|heal| heal + facts.recovery_ms() < *eof)
        && facts.requests.iter().all(|r| r.at_ms + due < *eof);
    if settled {
        if report.num("inflight") > 0 || waiting > 0 {
            problems.push(format!("{} requests still in flight after settle (client waits on {waiting})", report.num("inflight")));
        }
        if report.num("notes") > 0 {
            problems.push(format!("{} notifications still waiting after settle", report.num("notes")));
        }
        let open = facts.stories.streams.iter().filter(|s| s.opened_ms <= *eof && s.closed_ms.is_none_or(|c| c + facts.slack_ms > *eof)).count();
        let session = report.get("session") == Some(&Value::Bool(true));
        if open != 1 || !session {
            problems.push(format!("after settle the relayer serves {open} streams and the bridge reports session={session}"));
        }
        if report.text("tasks") != IDLE_TASKS {
            problems.push(format!("tasks {} after settle; the idle set is {IDLE_TASKS}", report.text("tasks")));
        }
    }
    if problems.is_empty() {
        verdicts::held();
    }
    let found = problems.into_iter().map(|p| facts.violation("quiescence", index, format!("the bridge's report at stdin EOF {p}"))).collect();
    capped(found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::McpSchema;
    use crate::trace::{Trace, TraceEvent};

    fn judge(answer: Value) -> Vec<Violation> {
        let spec = [("family", json!("relay")), ("call_timeout_ms", json!(1_000)), ("sweep_period_ms", json!(500)), ("slack_ms", json!(10)), ("horizon_ms", json!(10_000))];
        let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
        let events = vec![
            TraceEvent::new(0, host::SIM, kind::RUN_SPEC, &spec),
            TraceEvent::new(100, host::CLIENT, kind::MCP_SEND, &[("msg", json!(ping.to_string())), ("malformed", json!(false))]),
            TraceEvent::new(101, host::CLIENT, kind::MCP_RECV, &[("msg", json!(answer.to_string()))]),
        ];
        let trace = Trace { events };
        user_outcomes(&Facts::new(&trace, &McpSchema::new()))
    }

    /// mcp-proxy 0.13.0 answers `ping` from its own stdio server and never forwards it
    /// (live.v1.relay.none.872c9e8dadfad280): the empty result is the truth, not a made-up
    /// answer. Anything else the server never sent still is.
    #[test]
    fn a_ping_the_bridge_answers_itself_is_answered_truthfully() {
        assert!(judge(json!({"jsonrpc": "2.0", "id": 9, "result": {}})).is_empty());
        let made_up = judge(json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "no"}}));
        assert_eq!(made_up.len(), 1, "{made_up:#?}");
        assert!(made_up[0].detail.contains("which the relayer never sent"), "{}", made_up[0].detail);
        assert_eq!(judge(json!({"jsonrpc": "2.0", "id": 9, "result": {"pong": true}})).len(), 1);
    }

    /// mcp-proxy 0.13.0 over HTTP+SSE, live.v1.relay.none.b460a250f07d4536: the client cancels its
    /// tools/call, and the bridge answers it at once with its own error (code 0, "Request
    /// cancelled"). The client asked for no answer; none is made up. The same error to a call
    /// the client had not cancelled, or cancelled only after the answer, still is.
    #[test]
    fn a_request_the_client_cancelled_may_be_answered_by_the_bridge() {
        let spec = [("family", json!("relay")), ("call_timeout_ms", json!(1_000)), ("sweep_period_ms", json!(500)), ("slack_ms", json!(10)), ("horizon_ms", json!(10_000))];
        let send = |at_ms: u64, msg: Value| TraceEvent::new(at_ms, host::CLIENT, kind::MCP_SEND, &[("msg", json!(msg.to_string())), ("malformed", json!(false))]);
        let call = json!({"jsonrpc": "2.0", "id": "r7", "method": "tools/call", "params": {"name": "recall", "arguments": {}}});
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r7", "reason": "the user cancelled"}});
        let cancel_other = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "the user cancelled"}});
        let error = json!({"jsonrpc": "2.0", "id": "r7", "error": {"code": 0, "message": "Request cancelled"}});
        let recv = TraceEvent::new(300, host::CLIENT, kind::MCP_RECV, &[("msg", json!(error.to_string()))]);
        let judge = |events: Vec<TraceEvent>| {
            let trace = Trace { events: [vec![TraceEvent::new(0, host::SIM, kind::RUN_SPEC, &spec)], events].concat() };
            user_outcomes(&Facts::new(&trace, &McpSchema::new()))
        };
        let cancelled = judge(vec![send(100, call.clone()), send(200, cancel.clone()), recv.clone()]);
        assert!(cancelled.is_empty(), "{cancelled:#?}");
        // Another id (the number 7, not the string "r7"), or a cancellation after the answer.
        for events in [vec![send(100, call.clone()), send(200, cancel_other), recv.clone()], vec![send(100, call), recv, send(400, cancel)]] {
            let made_up = judge(events);
            assert_eq!(made_up.len(), 1, "{made_up:#?}");
            assert!(made_up[0].detail.contains("which the relayer never sent"), "{}", made_up[0].detail);
        }
    }

    /// mcp-proxy 0.13.0, live.v1.relay.none.47699b8cf39929cd: the client sends tools/list id 1
    /// and, while it is in flight, ping id 1; the bridge answers the ping first, itself. The
    /// empty result answers the ping, not a made-up tools/list.
    #[test]
    fn an_answer_to_an_id_reused_in_flight_may_answer_either_request() {
        let spec = [("family", json!("relay")), ("call_timeout_ms", json!(1_000)), ("sweep_period_ms", json!(500)), ("slack_ms", json!(10)), ("horizon_ms", json!(10_000))];
        let send = |at_ms: u64, msg: Value| TraceEvent::new(at_ms, host::CLIENT, kind::MCP_SEND, &[("msg", json!(msg.to_string())), ("malformed", json!(false))]);
        let events = vec![
            TraceEvent::new(0, host::SIM, kind::RUN_SPEC, &spec),
            send(100, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
            send(101, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            TraceEvent::new(102, host::CLIENT, kind::MCP_RECV, &[("msg", json!(json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string()))]),
        ];
        let trace = Trace { events };
        let found = user_outcomes(&Facts::new(&trace, &McpSchema::new()));
        assert!(found.iter().all(|v| !v.detail.contains("never sent")), "{found:#?}");
    }
}
