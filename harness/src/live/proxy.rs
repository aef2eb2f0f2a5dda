//! A held link, live: a TCP proxy on 127.0.0.1 between the bridge and the mock server. While the
//! link is held, connections are still accepted (the kernel completes the handshake) but no byte
//! and no close crosses in either direction; on release everything held goes through, in order,
//! as after a partition that heals. Turmoil's `hold`/`release` do the same in the simulation.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; dropping it stops accepting (open connections end with the case's runtime).
pub struct LinkProxy {
    held: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Listen on an ephemeral port of 127.0.0.1; [`LinkProxy::forward`] starts forwarding.
    pub async fn bind() -> std::io::Result<(TcpListener, u16)> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        Ok((listener, port))
    }

    /// Forward every connection accepted on `listener` to 127.0.0.1:`upstream` (on the current
    /// `LocalSet`).
    pub fn forward(listener: TcpListener, upstream: u16) -> Self {
        let (held, watching) = watch::channel(false);
        let accept = tokio::task::spawn_local(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let watching = watching.clone();
                tokio::task::spawn_local(async move {
                    // The server down (restarting): the bridge's connection is refused in effect.
                    let Ok(outbound) = TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (from_bridge, to_server) = (inbound.into_split(), outbound.into_split());
                    let (bridge_read, bridge_write) = from_bridge;
                    let (server_read, server_write) = to_server;
                    let up = tokio::task::spawn_local(pump(bridge_read, server_write, watching.clone()));
                    pump(server_read, bridge_write, watching).await;
                    let _ = up.await;
                });
            }
        });
        Self { held, accept }
    }

    /// Hold (`true`) or release (`false`) every byte on the link.
    pub fn hold(&self, on: bool) {
        self.held.send_replace(on);
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copy `from` to `to`, waiting out every hold before each write and before passing on the end.
async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, mut held: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = from.read(&mut buf).await;
        if held.wait_for(|held| !*held).await.is_err() {
            return;
        }
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_held_link_passes_nothing_until_it_is_released_then_everything_in_order() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let server = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
            let upstream = server.local_addr().unwrap().port();
            let (listener, port) = LinkProxy::bind().await.unwrap();
            let proxy = LinkProxy::forward(listener, upstream);
            let echo = tokio::task::spawn_local(async move {
                let (mut conn, _) = server.accept().await.unwrap();
                let mut buf = [0u8; 64];
                loop {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => conn.write_all(&buf[..n]).await.unwrap(),
                    }
                }
            });
            let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            client.write_all(b"one").await.unwrap();
            let mut buf = [0u8; 3];
            client.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"one");
            proxy.hold(true);
            client.write_all(b"two").await.unwrap();
            let waited = tokio::time::timeout(Duration::from_millis(200), client.read(&mut buf)).await;
            assert!(waited.is_err(), "a byte crossed a held link");
            proxy.hold(false);
            client.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"two", "the held bytes were not delivered on release");
            drop(client);
            echo.await.unwrap();
        });
    }
}
