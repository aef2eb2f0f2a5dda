//! One client connection of a daemon process: read the request, write progress frames from
//! dispatch at the negotiated cadence (only to clients that asked), then the response, then end
//! the connection. Writes pass the stall knob; a reset fault drops the connection.

use std::rc::Rc;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::config::{PROGRESS_INTERVAL_MS, PROTOCOL_VERSION, STATUS_TIMEOUT_MIN_MS};
use super::knobs::{self, lock};
use super::methods;
use super::process::Ctx;
use super::wire::{self, code, Failure, Request};
use crate::emit;
use crate::events::kind;
use crate::seam::{self, TcpStream};

/// Serve one connection; a reset fault ends it early, dropping the work with it.
pub async fn connection(ctx: Rc<Ctx>, stream: TcpStream) {
    let (epoch, changed) = {
        let knobs = lock(&ctx.knobs);
        (knobs.reset_epoch, knobs.changed.clone())
    };
    let reset = async {
        loop {
            let notified = changed.notified();
            if lock(&ctx.knobs).reset_epoch != epoch {
                return;
            }
            notified.await;
        }
    };
    tokio::select! {
        () = serve(&ctx, stream) => {}
        () = reset => emit!(kind::FAULT_FIRED, fault = "socket_reset", id = ""),
    }
}

async fn serve(ctx: &Rc<Ctx>, stream: TcpStream) {
    let (reader, mut writer) = tokio::io::split(stream);
    let mut lines = BufReader::new(reader).lines();
    let read = tokio::time::timeout(
        Duration::from_millis(STATUS_TIMEOUT_MIN_MS),
        lines.next_line(),
    );
    let Ok(Ok(Some(line))) = read.await else {
        return;
    };
    // A process that accepted a `stop` takes no new work: the connection ends unanswered, as
    // at a closed socket, and the client retries on the daemon that replaces it. Admitting the
    // request would let the exit kill it.
    if ctx.state.borrow().stopping {
        return;
    }
    let admitted = seam::now();
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(error) => {
            let failure = Failure::new(code::INVALID_JSON, format!("invalid request: {error}"));
            let _ = write_line(ctx, &mut writer, &wire::response("", &Err(failure))).await;
            return;
        }
    };
    let interval_ms = frame_interval_ms(ctx, &request);
    let first_ms = ctx.rules.first_frame_ms();
    emit!(
        kind::DAEMON_REQUEST,
        pid = ctx.pid,
        id = %request.id,
        method = %request.method,
        protocol = request.protocol_version.unwrap_or(0),
        interval_ms = interval_ms.unwrap_or(0),
        first_ms = if interval_ms.is_some() { first_ms } else { 0 }
    );
    // Work is counted; a control request (`status`, `stop`) is not: probes queued behind a
    // stall are no requests in flight, and must not make the daemon look busy to a drain.
    let counted = (!is_control(&request.method)).then(|| Active::admit(ctx));
    ctx.state.borrow_mut().last_request.clone_from(&request.id);
    let outcome = with_frames(ctx, (&mut lines, &mut writer), &request, (interval_ms, admitted)).await;
    drop(counted);
    let Ok(outcome) = outcome else { return };
    let (ok, code) = (
        outcome.is_ok(),
        outcome.as_ref().err().map_or("", |f| f.code),
    );
    if write_line(ctx, &mut writer, &wire::response(&request.id, &outcome))
        .await
        .is_err()
    {
        return;
    }
    emit!(kind::DAEMON_REPLY, pid = ctx.pid, id = %request.id, ok, code);
    // A daemon (or a proxy in front of it) that keeps the connection open after the response:
    // the client must settle on the response frame, not on the connection's end.
    let hold_ms = lock(&ctx.knobs).hold_open_ms;
    if hold_ms > 0 {
        emit!(kind::FAULT_FIRED, fault = "keep_open", id = %request.id);
        seam::sleep_ms(hold_ms).await;
    }
    let _ = writer.shutdown().await;
    if request.method == "stop" && ok {
        ctx.stop.notify_one();
    }
}

/// The methods that ask about or act on the daemon itself, with no work upstream: they answer
/// at once, with no frames.
fn is_control(method: &str) -> bool {
    matches!(method, "status" | "stop")
}

/// A request counted in `activeRequests` from admission until its work ends: answered, failed,
/// or dropped with its connection (a reset drops the serving future mid-await, so the count is
/// given back on drop, not after the await: otherwise one reset leaves the daemon "busy" forever
/// and every later replacement drains out and is refused).
struct Active<'a>(&'a Ctx);

impl<'a> Active<'a> {
    fn admit(ctx: &'a Ctx) -> Self {
        ctx.state.borrow_mut().active += 1;
        Self(ctx)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.borrow_mut();
        state.active = state.active.saturating_sub(1);
    }
}

/// The cadence for this client, or `None` when it gets no frames: only protocol-2 clients that
/// asked with `progressIntervalMs`, and never from a protocol-1 daemon.
fn frame_interval_ms(ctx: &Ctx, request: &Request) -> Option<u64> {
    let bugs = ctx.rules.bugs;
    if ctx.protocol_version < PROTOCOL_VERSION || bugs.no_progress_frames {
        return None;
    }
    if bugs.frames_to_v1_clients && !is_control(&request.method) {
        let asked = request.progress_interval_ms.unwrap_or(PROGRESS_INTERVAL_MS);
        return Some(ctx.rules.frame_interval_ms(asked));
    }
    let asked = request.progress_interval_ms?;
    let modern = request
        .protocol_version
        .is_some_and(|v| v >= PROTOCOL_VERSION);
    modern.then(|| ctx.rules.frame_interval_ms(asked))
}

/// Run the request's work, writing a progress frame at `first_frame_ms` after dispatch and then
/// every interval until it ends. `Err` when the client has gone: a write failed, or, after a
/// frame, the client's side of the connection has ended. A frame written late (the event loop
/// was stalled) may find its client long gone, failed over to another daemon with the same
/// action; work nobody waits for is dropped there, before it reaches upstream a second time
/// (soak token v1.daemon.none.a9dcec5822732a2a).
async fn with_frames<R: AsyncBufReadExt + Unpin, W: AsyncWriteExt + Unpin>(
    ctx: &Rc<Ctx>,
    (lines, writer): (&mut tokio::io::Lines<R>, &mut W),
    request: &Request,
    (interval_ms, admitted): (Option<u64>, seam::Instant),
) -> std::io::Result<Result<Value, Failure>> {
    let work = methods::dispatch(ctx, request, admitted);
    tokio::pin!(work);
    let Some(interval_ms) = interval_ms else {
        return tokio::select! {
            outcome = &mut work => Ok(outcome),
            () = hung_up(ctx, lines) => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
    };
    let interval = Duration::from_millis(interval_ms);
    let mut next = seam::now() + Duration::from_millis(ctx.rules.first_frame_ms());
    loop {
        tokio::select! {
            outcome = &mut work => return Ok(outcome),
            () = hung_up(ctx, lines) => return Err(std::io::ErrorKind::BrokenPipe.into()),
            () = tokio::time::sleep_until(next) => {
                write_line(ctx, writer, &wire::progress(&frame_id(ctx, &request.id))).await?;
                if client_gone(lines) {
                    return Err(std::io::ErrorKind::BrokenPipe.into());
                }
                // After a stall, one frame, then the cadence again: no burst of stale frames.
                next = (next + interval).max(seam::now());
            }
        }
    }
}

/// The client ended its side of the connection (it writes one request, then only reads), as the
/// event loop sees it: a hang-up is an event like any other, handled when the loop runs (not
/// during a stall). Work whose client has left is dropped at once, not at the next frame: a
/// flow whose request went is over before the user's approval can reach it (daemon soak,
/// `v1.daemon.none.88443e5809ff13d2`: the client left at 1302 ms, the next frame was due at
/// 1510 ms, and the redirect accepted at 1500 ms had its code thrown away; `approvals_are_used`).
/// `next_line` is cancel safe.
async fn hung_up<R: AsyncBufReadExt + Unpin>(ctx: &Ctx, lines: &mut tokio::io::Lines<R>) {
    while let Ok(Some(_)) = lines.next_line().await {}
    knobs::wait_while(&ctx.knobs, |k| k.stall).await;
}

/// Whether the client has ended its side of the connection, looked at without waiting.
fn client_gone<R: AsyncBufReadExt + Unpin>(lines: &mut tokio::io::Lines<R>) -> bool {
    matches!(lines.next_line().now_or_never(), Some(Ok(None) | Err(_)))
}

/// The id a progress frame carries: the request's own, or, under the crossed-frames fault,
/// another request's (the one admitted last, or one that never existed).
fn frame_id(ctx: &Ctx, id: &str) -> String {
    if !lock(&ctx.knobs).crossed_frames {
        return id.to_string();
    }
    let last = ctx.state.borrow().last_request.clone();
    if last == id || last.is_empty() {
        format!("{id}-other")
    } else {
        last
    }
}

/// Write one line, waiting while the event loop is stalled.
async fn write_line<W: AsyncWriteExt + Unpin>(
    ctx: &Ctx,
    writer: &mut W,
    line: &str,
) -> std::io::Result<()> {
    knobs::wait_while(&ctx.knobs, |k| k.stall).await;
    writer.write_all(format!("{line}\n").as_bytes()).await?;
    writer.flush().await
}
