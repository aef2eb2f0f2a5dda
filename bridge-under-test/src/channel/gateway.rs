//! The mock chat gateway: a WebSocket server (tokio-tungstenite over turmoil TCP) that sends
//! approval requested/resolved events stamped on its own clock and operator chat messages, at
//! their virtual times. While it is down, or before the bridge connects, what it sends is lost:
//! there is no catch-up. Fault knobs (down, clock offset, overrides, injected events) are set by
//! the harness between steps.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Message;

use super::{opt, wire, GATEWAY_PORT};
use crate::emit;
use crate::events::kind;
use crate::seam::{self, TcpListener};

/// One thing the gateway sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GatewayEvent {
    /// `exec.approval.requested` (or `plugin.*`). `created` adds `createdAtMs` (now);
    /// `expires_in_ms` adds `expiresAtMs` = now + it. Both on the gateway's clock.
    ApprovalRequested {
        id: String,
        plugin: bool,
        created: bool,
        expires_in_ms: Option<i64>,
    },
    /// `exec.approval.resolved` (or `plugin.*`).
    ApprovalResolved { id: String, plugin: bool },
    /// `session.message`: operator chat.
    Message {
        session: String,
        text: String,
        owner: bool,
    },
    /// A WebSocket control frame on the live connection: a ping (the bridge's WebSocket library
    /// answers it with a pong) or a close (it answers with a close and the connection ends).
    Control { frame: ControlFrame },
}

/// A control frame a real gateway sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlFrame {
    Ping,
    Close,
}

/// An event at a virtual time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayStep {
    pub at_ms: u64,
    #[serde(flatten)]
    pub event: GatewayEvent,
}

/// What a step's `expiresAtMs` becomes instead of the scripted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryOverride {
    Absent,
    /// An absolute value, whatever the clock says (0, negative, the year 9999).
    Absolute(i64),
    /// Now on the gateway's clock plus this (negative: already past).
    Relative(i64),
    /// Not a number at all.
    Text,
}

/// The gateway's fault knobs.
#[derive(Debug, Default)]
pub struct GatewayKnobs {
    /// Refuse connections and drop the live one.
    pub down: Cell<bool>,
    /// The gateway clock's offset from the bridge's, in ms.
    pub offset_ms: Cell<i64>,
    /// Script step index → its `expiresAtMs` override.
    pub overrides: RefCell<BTreeMap<usize, ExpiryOverride>>,
    /// Extra events to send now (bursts, re-broadcasts).
    pub inject: RefCell<VecDeque<GatewayEvent>>,
    /// Woken when a knob changes.
    pub changed: Notify,
}

/// The gateway's software: listener, script and injector.
pub async fn run(
    steps: Vec<GatewayStep>,
    knobs: Rc<GatewayKnobs>,
    clock_base_ms: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let gateway = Rc::new(Gateway {
        knobs,
        clock_base_ms,
        start: seam::now(),
        conn: RefCell::new(None),
    });
    let listener = TcpListener::bind(("0.0.0.0", GATEWAY_PORT)).await?;
    tokio::task::spawn_local(gateway.clone().script(steps));
    tokio::task::spawn_local(gateway.clone().injector());
    tokio::task::spawn_local(gateway.clone().watch_down());
    let mut next_conn = 0u64;
    loop {
        let (stream, _) = listener.accept().await?;
        let accepted = !gateway.knobs.down.get();
        emit!(kind::GATEWAY_ACCEPT, accepted);
        if !accepted {
            continue;
        }
        if let Ok(socket) = tokio_tungstenite::accept_async(stream).await {
            next_conn += 1;
            let (tx, rx) = mpsc::unbounded_channel();
            *gateway.conn.borrow_mut() = Some((next_conn, tx));
            emit!(kind::GATEWAY_CONN, conn = next_conn);
            tokio::task::spawn_local(gateway.clone().serve(next_conn, socket, rx));
        }
    }
}

struct Gateway {
    knobs: Rc<GatewayKnobs>,
    clock_base_ms: u64,
    start: seam::Instant,
    /// The live connection: its number and its outbox.
    conn: RefCell<Option<(u64, mpsc::UnboundedSender<Message>)>>,
}

impl Gateway {
    /// The gateway's wall clock: the shared base, its offset, elapsed time.
    fn now_ms(&self) -> i64 {
        let base =
            i64::try_from(self.clock_base_ms + seam::ms_since(self.start)).unwrap_or(i64::MAX);
        base.saturating_add(self.knobs.offset_ms.get())
    }

    /// Send a frame on the live connection; whether there was one.
    fn deliver(&self, frame: String) -> bool {
        self.deliver_message(Message::text(frame))
    }

    fn deliver_message(&self, message: Message) -> bool {
        let conn = self.conn.borrow();
        conn.as_ref().is_some_and(|(_, tx)| tx.send(message).is_ok())
    }

    fn send(&self, event: &GatewayEvent, expiry: Option<ExpiryOverride>) {
        let now_ms = self.now_ms();
        match event {
            GatewayEvent::ApprovalRequested {
                id,
                plugin,
                created,
                expires_in_ms,
            } => {
                let created_at = created.then_some(now_ms);
                let mut payload = json!({"id": id});
                if let Some(at) = created_at {
                    payload["createdAtMs"] = json!(at);
                }
                let expires = match expiry {
                    None => expires_in_ms.map(|ms| json!(now_ms.saturating_add(ms))),
                    Some(ExpiryOverride::Absent) => None,
                    Some(ExpiryOverride::Absolute(at)) => Some(json!(at)),
                    Some(ExpiryOverride::Relative(ms)) => Some(json!(now_ms.saturating_add(ms))),
                    Some(ExpiryOverride::Text) => Some(json!("soon")),
                };
                let shown = expires.as_ref().map(|v| v.to_string()).unwrap_or_default();
                if let Some(value) = expires {
                    payload["expiresAtMs"] = value;
                }
                let name = wire::approval_event(*plugin, false);
                let delivered = self.deliver(wire::frame(name, payload));
                let created_at_ms = opt(created_at);
                emit!(
                    kind::GATEWAY_SEND,
                    event = name,
                    id = %id,
                    created_at_ms = %created_at_ms,
                    expires_at_ms = %shown,
                    delivered
                );
            }
            GatewayEvent::ApprovalResolved { id, plugin } => {
                let name = wire::approval_event(*plugin, true);
                let delivered = self.deliver(wire::frame(name, json!({"id": id})));
                let (id, created_at_ms, expires_at_ms) = (id.as_str(), "", "");
                emit!(
                    kind::GATEWAY_SEND,
                    event = name,
                    id,
                    created_at_ms,
                    expires_at_ms,
                    delivered
                );
            }
            GatewayEvent::Message {
                session,
                text,
                owner,
            } => {
                let payload =
                    json!({"sessionKey": session, "message": text, "senderIsOwner": owner});
                let delivered = self.deliver(wire::frame(wire::SESSION_MESSAGE, payload));
                emit!(kind::GATEWAY_SAY, session = %session, owner, text = %text, delivered);
            }
            GatewayEvent::Control { frame } => {
                let conn = self.conn.borrow().as_ref().map_or(0, |(n, _)| *n);
                let (message, name) = match frame {
                    ControlFrame::Ping => (Message::Ping(b"keepalive".to_vec().into()), "ping"),
                    ControlFrame::Close => (Message::Close(None), "close"),
                };
                let delivered = self.deliver_message(message);
                emit!(kind::GATEWAY_CONTROL, conn, frame = name, delivered);
            }
        }
    }

    async fn script(self: Rc<Self>, steps: Vec<GatewayStep>) {
        for (index, step) in steps.iter().enumerate() {
            tokio::time::sleep_until(self.start + std::time::Duration::from_millis(step.at_ms))
                .await;
            let expiry = self.knobs.overrides.borrow().get(&index).copied();
            self.send(&step.event, expiry);
        }
    }

    async fn injector(self: Rc<Self>) {
        loop {
            let changed = self.knobs.changed.notified();
            let next = self.knobs.inject.borrow_mut().pop_front();
            match next {
                Some(event) => self.send(&event, None),
                None => changed.await,
            }
        }
    }

    /// Drop the live connection whenever the gateway goes down.
    async fn watch_down(self: Rc<Self>) {
        loop {
            let changed = self.knobs.changed.notified();
            if self.knobs.down.get() {
                if let Some((_, tx)) = self.conn.borrow_mut().take() {
                    drop(tx);
                    emit!(kind::GATEWAY_CUT, connected = true);
                }
            }
            changed.await;
        }
    }

    /// Write the outbox to one connection until it is cut (outbox closed) or the peer leaves.
    async fn serve(
        self: Rc<Self>,
        number: u64,
        socket: tokio_tungstenite::WebSocketStream<seam::TcpStream>,
        mut rx: mpsc::UnboundedReceiver<Message>,
    ) {
        let (mut sink, mut stream) = socket.split();
        let reason = loop {
            tokio::select! {
                frame = rx.recv() => match frame {
                    // After our close frame the peer answers with its own and the stream ends.
                    Some(frame) => {
                        // A frame may wait for the peer's receive window. Keep watching the read
                        // half meanwhile: a peer that resets the connection (it closed with our
                        // frames unread) ends it here, as a real socket's write would fail, where
                        // the simulator's window would never reopen.
                        let mut send = sink.send(frame);
                        let ended = loop {
                            tokio::select! {
                                sent = &mut send => break sent.is_err(),
                                incoming = stream.next() => if !matches!(incoming, Some(Ok(_))) { break true },
                            }
                        };
                        if ended {
                            break "peer";
                        }
                    }
                    None => break "cut",
                },
                incoming = stream.next() => if !matches!(incoming, Some(Ok(_))) { break "peer" },
            }
        };
        emit!(kind::GATEWAY_END, conn = number, reason);
        let mut conn = self.conn.borrow_mut();
        if conn.as_ref().is_some_and(|(n, _)| *n == number) {
            *conn = None;
        }
    }
}
