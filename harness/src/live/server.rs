//! The mock server of a live case on 127.0.0.1: the relay family's mock relayer, served over
//! real TCP through the seam, on a thread of its own. Each incarnation runs on a fresh tokio
//! runtime, so a restart (fault `relayer_bounce`) drops every connection and session it had,
//! as a crashed process would; the port stays the same and is closed while it is down.

use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use bridge_under_test::events::host;
use bridge_under_test::relay::knobs::SharedKnobs;
use bridge_under_test::relay::relayer::{self, SharedDurable, Transport};
use bridge_under_test::relay::RelayerConfig;
use bridge_under_test::seam;
use tokio::sync::mpsc;

use crate::recorder::{announce, Recorder};

/// How long a restarting server keeps its port closed.
const RESTART_DOWN_MS: u64 = 200;

enum Command {
    Restart,
    Stop,
}

/// A running mock server.
pub struct MockServer {
    pub port: u16,
    /// The path a client is given (the stream, or the MCP endpoint).
    path: &'static str,
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<JoinHandle<()>>,
}

/// What the server serves, and how.
pub struct ServerParts {
    pub config: RelayerConfig,
    pub knobs: SharedKnobs,
    pub durable: SharedDurable,
    pub transport: Transport,
    /// Require the bearer token (the relayer transport always does).
    pub auth: bool,
    /// The port the bridge reaches the server at, when a proxy stands in between (what the
    /// server names in absolute URLs); its own port otherwise.
    pub public_port: Option<u16>,
}

impl MockServer {
    /// Start serving on an ephemeral port of 127.0.0.1, recording into `recorder`.
    pub fn start(parts: ServerParts, recorder: Recorder) -> std::io::Result<Self> {
        let parts_path = parts.transport.path();
        let (commands, mut inbox) = mpsc::unbounded_channel();
        let (port_tx, port_rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new().name("live-server".into()).spawn(move || {
            tracing::subscriber::with_default(recorder.subscriber(), || {
                seam::use_real_network();
                let mut port = 0;
                loop {
                    match incarnation(&parts, &mut port, &port_tx, &mut inbox) {
                        Some(Command::Restart) => std::thread::sleep(Duration::from_millis(RESTART_DOWN_MS)),
                        Some(Command::Stop) | None => return,
                    }
                }
            });
        })?;
        let port = port_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| std::io::Error::other("the mock server did not start"))??;
        Ok(Self { port, path: parts_path, commands, thread: Some(thread) })
    }

    /// Restart the server: every connection and session is lost (the execution log is kept).
    pub fn restart(&self) {
        let _ = self.commands.send(Command::Restart);
    }

    /// The URL a bridge connects to: the server's, or through the proxy on `public_port`.
    pub fn url(&self, public_port: Option<u16>) -> String {
        format!("http://127.0.0.1:{}{}", public_port.unwrap_or(self.port), self.path)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serve on a fresh runtime until a command comes; dropping the runtime drops every connection.
fn incarnation(
    parts: &ServerParts,
    port: &mut u16,
    port_tx: &std_mpsc::Sender<std::io::Result<u16>>,
    inbox: &mut mpsc::UnboundedReceiver<Command>,
) -> Option<Command> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        announce(host::RELAYER);
        let listener = match seam::TcpListener::bind(("127.0.0.1", *port)).await {
            Ok(listener) => listener,
            Err(error) => {
                let _ = port_tx.send(Err(error));
                return None;
            }
        };
        if *port == 0 {
            *port = listener.port().unwrap_or(0);
            let _ = port_tx.send(Ok(*port));
        }
        let mut config = parts.config.clone();
        config.authority = format!("127.0.0.1:{}", parts.public_port.unwrap_or(*port));
        let (knobs, durable, transport, auth) = (parts.knobs.clone(), parts.durable.clone(), parts.transport, parts.auth);
        let _server = tokio::task::spawn_local(async move {
            let _ = relayer::serve_transport(listener, config, knobs, durable, transport, auth).await;
        });
        inbox.recv().await
    })
}
