//! The sdk family: a stdio ⇄ Streamable HTTP bridge built on rmcp, the official Rust SDK, as an
//! author following its documentation writes one (`bridge.rs`), on an rmcp
//! `StreamableHttpClient` over hyper and the seam's TCP (`http_client.rs`). Its switches do
//! not add bugs: each turns off a workaround the bridge carries for an rmcp defect, so what the
//! harness finds with one on is rmcp's behaviour.

pub mod bridge;
pub mod http_client;
pub mod server;
pub mod shim;

pub use bridge::{run, Proxy, SdkBridgeConfig};

crate::bug_switches! {
    /// The family's switches. The system under test is rmcp as released; a switch turns off a
    /// workaround the bridge carries for an rmcp defect (docs/findings.md), so the defect's
    /// token still replays it.
    SdkBugs {
        /// Forward a client notification's `_meta` from `NotificationContext::meta`, as rmcp's
        /// API offers it. rmcp 3.11.0 leaves that empty (src/service.rs:1775-1776 moves the
        /// extensions out before the meta); the bridge reads the meta from
        /// `context.extensions` instead.
        notification_context_meta,
        /// Hand rmcp a line that is JSON but no JSON-RPC message. rmcp 3.11.0 answers it with an
        /// error that has no `id` member at all, even when the line's id was valid
        /// (src/transport/async_rw.rs:257-260, 325-330); the bridge answers it itself, with the
        /// line's id when it had a valid one, as JSON-RPC 2.0 §5 asks.
        invalid_request_without_id,
        /// Hand rmcp a request whose id is still in flight. rmcp 3.11.0 runs it and replaces
        /// the first request's entry (src/service.rs:1652), so the first answer is dropped as
        /// "cancelled" (src/service.rs:1568-1570) and the client reads the second's answer for
        /// both; the bridge refuses the reuse itself (-32600 with the id).
        in_flight_id_reuse,
        /// Hand rmcp a refused POST's JSON-RPC error as the server wrote it. Streamable HTTP lets
        /// that error have no id; rmcp 3.11.0's client passes it on as the POST's answer
        /// (src/transport/streamable_http_client.rs:1804-1811, as its reqwest client reads it,
        /// src/transport/common/reqwest/streamable_http_client.rs:367-410), and its service drops
        /// an error with no id (src/service.rs:1805-1811): the request waits forever, with no
        /// request timeout, and a refused notification is reported sent. The bridge's HTTP
        /// client gives the error the request's id, and fails a notification's send on a 5xx.
        refusal_without_id,
        /// Wait for the server's `initialize` answer as rmcp's `serve` does: with no timer
        /// (`control_request_timeout` covers only responses and cancellations,
        /// src/transport/streamable_http_client.rs:780, 1192-1201), so one lost answer holds
        /// every client request forever. The bridge gives each handshake `HANDSHAKE_TIMEOUT`
        /// and starts another on a new connection.
        handshake_without_timeout,
        /// Fail the requests waiting on a handshake whose answer's stream was cut, as rmcp's
        /// `serve` does. rmcp 3.11.0 reads the `initialize` POST's event stream to its end
        /// without resuming it (`expect_initialized`, src/transport/streamable_http_client.rs:
        /// 343-381; the worker quits, "process initialize response", `:1262-1265`), though it
        /// resumes every later request's stream from its event id, so a stream cut before the
        /// answer fails `serve` ("connection closed: initialize response",
        /// src/service/client.rs:1015-1018) and every request waiting to be sent with it. The
        /// bridge starts the handshake again on a new connection, backing off, as it does one
        /// with no answer.
        handshake_stream_not_resumed,
        /// Leave a session whose resumed stream the server refuses (404: it forgot the session)
        /// to rmcp. rmcp 3.11.0 tries the resumption's GET again on any error but a refused
        /// SSE or an auth failure (`classify_reconnect_error`,
        /// src/transport/streamable_http_client.rs:667-675), with no limit by default, and
        /// never fails the request waiting on that stream: it waits until another POST of the
        /// bridge meets a 404, or for ever. The bridge leaves the session at the first 404.
        forgotten_session_resumed,
        /// Leave a session the server forgot to rmcp's recovery (`reinit_on_expired_session`,
        /// on by default). rmcp 3.11.0 answers a cancellation queued while it recovers `Ok` and
        /// never sends it (src/transport/streamable_http_client.rs:1435-1436, 1558-1568: R3),
        /// and takes no client message until every request it retried into the new session has
        /// its response (`:1380-1381`, `:1467`), so one retried request whose answer is lost
        /// freezes the bridge for good (R4). The bridge turns rmcp's recovery off and recovers
        /// itself: a request answered "Session expired" leaves the session and goes once more
        /// on a new one, and the client's notifications wait in its outbox meanwhile.
        rmcp_session_recovery,
    }
}
