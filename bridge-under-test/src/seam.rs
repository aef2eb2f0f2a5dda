//! The one narrow seam through which components reach the outside world: the network and the
//! clock. Inside the simulation the network is turmoil's simulated TCP and the clock is tokio
//! time, which turmoil pauses and advances virtually. A real process (the `relay-bridge` binary,
//! the live engine's mock peers) calls [`use_real_network`] first: the same component code then
//! speaks `tokio::net` on the real network, and tokio time is the real clock. madsim's shape:
//! one component, simulated or real by configuration.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

thread_local! {
    /// Whether this thread's components use the real network (set once, before they start).
    static REAL: Cell<bool> = const { Cell::new(false) };
}

/// Make the components started on this thread use the real network (`tokio::net`) instead of
/// turmoil's. Called by real processes before they start anything; never inside a simulation.
pub fn use_real_network() {
    REAL.with(|real| real.set(true));
}

fn real() -> bool {
    REAL.with(Cell::get)
}

/// A TCP connection, simulated or real.
#[derive(Debug)]
pub enum TcpStream {
    Sim(turmoil::net::TcpStream),
    Real(tokio::net::TcpStream),
}

impl TcpStream {
    /// Connect to `(host, port)`: a turmoil host name in the simulation, a real address or name
    /// outside it.
    pub async fn connect((host, port): (&str, u16)) -> io::Result<Self> {
        if real() {
            let stream = tokio::net::TcpStream::connect((host, port)).await?;
            stream.set_nodelay(true)?;
            Ok(Self::Real(stream))
        } else {
            Ok(Self::Sim(turmoil::net::TcpStream::connect((host, port)).await?))
        }
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Sim(s) => Pin::new(s).poll_read(cx, buf),
            Self::Real(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Sim(s) => Pin::new(s).poll_write(cx, buf),
            Self::Real(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Sim(s) => Pin::new(s).poll_flush(cx),
            Self::Real(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Sim(s) => Pin::new(s).poll_shutdown(cx),
            Self::Real(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A listening socket, simulated or real.
pub enum TcpListener {
    Sim(turmoil::net::TcpListener),
    Real(tokio::net::TcpListener),
}

impl TcpListener {
    /// Listen on `(address, port)`. Outside the simulation, port 0 takes an ephemeral port
    /// ([`TcpListener::port`] tells which).
    pub async fn bind((address, port): (&str, u16)) -> io::Result<Self> {
        if real() {
            Ok(Self::Real(tokio::net::TcpListener::bind((address, port)).await?))
        } else {
            Ok(Self::Sim(turmoil::net::TcpListener::bind((address, port)).await?))
        }
    }

    /// A real listener bound beforehand (so its port is known before the server starts).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(Self::Real(tokio::net::TcpListener::from_std(listener)?))
    }

    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        match self {
            Self::Sim(l) => l.accept().await.map(|(s, a)| (TcpStream::Sim(s), a)),
            Self::Real(l) => {
                let (stream, addr) = l.accept().await?;
                stream.set_nodelay(true)?;
                Ok((TcpStream::Real(stream), addr))
            }
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> io::Result<u16> {
        match self {
            Self::Sim(l) => l.local_addr().map(|a| a.port()),
            Self::Real(l) => l.local_addr().map(|a| a.port()),
        }
    }
}

/// A point in time: virtual inside the simulation, real outside it.
pub type Instant = tokio::time::Instant;

/// The current instant of this host's clock.
#[allow(clippy::disallowed_methods)] // the seam itself: virtual inside the simulation
pub fn now() -> Instant {
    tokio::time::Instant::now()
}

/// Whole milliseconds elapsed since `earlier` on this host's clock.
pub fn ms_since(earlier: Instant) -> u64 {
    u64::try_from(now().saturating_duration_since(earlier).as_millis()).unwrap_or(u64::MAX)
}

/// Sleep for `ms` milliseconds of this host's clock.
pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}
