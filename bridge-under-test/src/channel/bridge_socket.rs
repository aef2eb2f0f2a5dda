//! The bridge's side of the gateway WebSocket: connect (tokio-tungstenite over turmoil TCP),
//! read frames into the bridge, reconnect with backoff. Events sent while the socket is down are
//! gone: there is no catch-up. The handshake key comes from the bridge's seeded RNG. The bridge
//! writes no data frames; tungstenite itself answers the gateway's ping and close frames, and
//! as a client it masks them with `rand::random()` (OS entropy no seed reaches). The mask changes
//! only payload bytes on the wire, not their number, and the gateway unmasks before reading, so
//! nothing recorded or timed depends on it: the suite's
//! `control_frames_answered_with_os_entropy_masks_leave_the_trace_unchanged` holds that.

use std::rc::Rc;

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::{http::Request, Message};
use tokio_tungstenite::WebSocketStream;

use super::bridge::Bridge;
use super::GATEWAY_PORT;
use crate::emit;
use crate::events::kind;
use crate::rng::SimRng;
use crate::seam::{self, TcpStream};

type Socket = WebSocketStream<TcpStream>;

/// Keep a connection to the gateway for the life of the process.
pub(super) async fn connect_loop(bridge: Rc<Bridge>) {
    let mut rng = SimRng::new(bridge.config.seed);
    let mut attempt = 0u32;
    loop {
        emit!(kind::GATEWAY_CONNECT, attempt);
        let reason = match open(&bridge.config.gateway, &mut rng).await {
            Ok(mut socket) => {
                attempt = 0;
                emit!(kind::GATEWAY_OPEN);
                read(&bridge, &mut socket).await
            }
            Err(_) => "error",
        };
        emit!(kind::GATEWAY_CLOSED, reason);
        seam::sleep_ms(bridge.config.reconnect_ms(attempt)).await;
        attempt = attempt.saturating_add(1);
    }
}

async fn open(host: &str, rng: &mut SimRng) -> Result<Socket, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect((host, GATEWAY_PORT)).await?;
    let request = Request::builder()
        .uri(format!("ws://{host}:{GATEWAY_PORT}/channel"))
        .header("Host", format!("{host}:{GATEWAY_PORT}"))
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", handshake_key(rng))
        .body(())?;
    let (socket, _response) = tokio_tungstenite::client_async(request, stream).await?;
    Ok(socket)
}

/// Feed text frames to the bridge until the socket ends; why it ended.
async fn read(bridge: &Rc<Bridge>, socket: &mut Socket) -> &'static str {
    while let Some(frame) = socket.next().await {
        match frame {
            Ok(Message::Text(text)) => bridge.on_frame(text.as_str()),
            Ok(Message::Close(_)) => return "eof",
            Ok(_) => {}
            Err(_) => return "error",
        }
    }
    "eof"
}

/// A `Sec-WebSocket-Key`: 16 seeded bytes, base64.
fn handshake_key(rng: &mut SimRng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = [0u8; 18];
    bytes[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    bytes[8..16].copy_from_slice(&rng.next_u64().to_le_bytes());
    let mut key = String::with_capacity(24);
    for chunk in bytes.chunks(3) {
        let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        for shift in [18, 12, 6, 0] {
            key.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
        }
    }
    key.truncate(22);
    key + "=="
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_keys_are_seeded_base64_of_sixteen_bytes() {
        let key = handshake_key(&mut SimRng::new(1));
        assert_eq!(key.len(), 24);
        assert!(key.ends_with("=="));
        assert_eq!(key, handshake_key(&mut SimRng::new(1)));
        assert_ne!(key, handshake_key(&mut SimRng::new(2)));
    }
}
