//! The stream writer every transport uses: it writes one SSE response body in its wire style,
//! with keep-alives, obeying the stall, EOF and flap knobs, and cuts each frame into chunks at
//! seeded points so a client's framing is tested.

use std::collections::VecDeque;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::App;
use crate::emit;
use crate::events::kind;
use crate::relay::knobs::lock;
use crate::relay::sse::Style;
use crate::seam;

/// Write `backlog` (the stream's opening), then every frame `items` brings, with keep-alives in
/// `style`, until the stream ends; returns who ended it: `client` (it closed its connection) or
/// `relayer` (a fault, or `items` closed and everything it brought was written). `session` names
/// the stream in the fault events.
///
/// The knobs as they are at opening decide its fate: a stream opened during a flap is dropped at
/// once (after its opening when the flap says so); one opened before a stall began writes
/// nothing at all, not even keep-alives, until that stall ends; an EOF ends it.
pub(super) async fn write(
    app: &App,
    session: &str,
    style: Style,
    mut backlog: VecDeque<String>,
    mut items: mpsc::UnboundedReceiver<String>,
    body: &mpsc::UnboundedSender<Bytes>,
) -> &'static str {
    let config = &app.0.config;
    let (changed, epoch, stalls_at_open, flap) = {
        let knobs = lock(&app.0.knobs);
        (knobs.changed.clone(), knobs.eof_epoch, knobs.stalls, knobs.flap)
    };
    let mut keepalive_at = seam::now() + std::time::Duration::from_millis(config.first_keepalive_ms);
    if let Some(after_opening) = flap {
        emit!(kind::FAULT_FIRED, fault = "stream_flap", id = "", client_id = "", action = "", session = %session, opening = after_opening);
        if after_opening {
            flush(app, &mut backlog, body);
        }
        return "relayer";
    }
    // `items` has closed: the stream ends once what it brought is written.
    let mut closing = false;
    loop {
        let notified = changed.notified();
        let (stall, eof) = {
            let knobs = lock(&app.0.knobs);
            (knobs.stalled(stalls_at_open), knobs.eof_epoch != epoch)
        };
        if eof {
            emit!(kind::FAULT_FIRED, fault = "stream_eof", id = "", client_id = "", action = "", session = %session);
            return "relayer";
        }
        if !stall && !flush(app, &mut backlog, body) {
            return "client";
        }
        // Everything it brought is written: the stream ends as its protocol says (a POST's
        // stream after its response), and what it carried is delivered before the end.
        if closing && backlog.is_empty() {
            return "complete";
        }
        tokio::select! {
            item = items.recv(), if !closing => match item {
                Some(frame) => backlog.push_back(frame),
                None => closing = true,
            },
            () = tokio::time::sleep_until(keepalive_at) => {
                if !stall {
                    backlog.push_back(style.keepalive());
                }
                keepalive_at += std::time::Duration::from_millis(config.keepalive_ms);
            }
            () = notified => {}
            () = body.closed() => return "client",
        }
    }
}

/// Write the backlog as seeded chunks; `false` once the client has gone.
fn flush(app: &App, backlog: &mut VecDeque<String>, body: &mpsc::UnboundedSender<Bytes>) -> bool {
    while let Some(frame) = backlog.pop_front() {
        let bytes = frame.into_bytes();
        let cut = {
            let mut live = lock(&app.0.live);
            match live.rng.below(3) {
                0 => live.rng.below(bytes.len() as u64) as usize,
                _ => 0,
            }
        };
        let parts = if cut == 0 { vec![&bytes[..]] } else { vec![&bytes[..cut], &bytes[cut..]] };
        for part in parts {
            if body.send(Bytes::copy_from_slice(part)).is_err() {
                return false;
            }
        }
    }
    true
}
