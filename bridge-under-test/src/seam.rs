//! The one narrow seam through which components reach the outside world: the network (turmoil's
//! simulated TCP) and the clock (tokio time, which turmoil pauses and advances virtually). A real
//! deployment would swap this module for `tokio::net` and the real clock.

pub use turmoil::net::{TcpListener, TcpStream};

/// A point in (virtual) time.
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
