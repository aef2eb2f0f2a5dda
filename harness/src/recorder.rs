//! The `tracing` subscriber that records trace events: only events with the trace target,
//! stamped with virtual time and the name of the turmoil host whose software emitted them.
//! Installed per thread (`tracing::subscriber::with_default`), so parallel runs never mix traces.
//!
//! Host attribution: turmoil gives every host its own tokio runtime. A host's software, started
//! through [`crate::family::host`] or [`crate::family::client`], first calls [`announce`], and
//! the recorder remembers which runtime is which host; an event is stamped with the host of the
//! runtime it is emitted on (`sim` outside every host). turmoil's per-host, per-step spans are
//! not recorded at all: handling them was the recorder's largest cost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bridge_under_test::events::{host, TARGET};
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use crate::trace::TraceEvent;

/// The target of the event that names the host a runtime belongs to (see [`announce`]).
const HOST_TARGET: &str = "mcp_sim::host";

/// Host name recorded for an event emitted on a runtime that never announced its host: software
/// added to the simulation without [`crate::family::host`] or [`crate::family::client`].
pub const UNANNOUNCED: &str = "?";

/// Name the host whose runtime is current: the first thing a host's software does. Hosts
/// restarted by turmoil get a new runtime and announce themselves again.
pub fn announce(host: &'static str) {
    tracing::event!(target: HOST_TARGET, Level::INFO, host);
}

/// The live engine's clock: milliseconds since a case began, in the bridge's time (the wall
/// clock times the speed its libfaketime runs it at, `live::speed`). The only place live mode
/// reads the wall clock; checkers read `at_ms` from the trace as always.
#[derive(Debug, Clone, Copy)]
pub struct LiveClock {
    start: std::time::Instant,
    speed: u64,
}

impl LiveClock {
    /// A clock for a bridge whose time runs `speed` times faster than the wall clock (1: real).
    #[allow(clippy::disallowed_methods)] // live mode's one wall clock (DESIGN.md §6a)
    pub fn start(speed: u64) -> Self {
        Self { start: std::time::Instant::now(), speed: speed.max(1) }
    }

    /// The bridge's milliseconds since the case began: what the trace is stamped with.
    pub fn ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis().saturating_mul(u128::from(self.speed))).unwrap_or(u64::MAX)
    }

    /// Wall milliseconds since the case began.
    pub fn wall_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The real instant `wall_ms` wall milliseconds after the case began.
    pub fn at_wall(&self, wall_ms: u64) -> std::time::Instant {
        self.start + std::time::Duration::from_millis(wall_ms)
    }
}

/// Shared between the layer (which appends) and the runner (which reads the clock it sets).
#[derive(Debug, Default)]
struct Shared {
    events: Mutex<Vec<TraceEvent>>,
    /// Virtual time of the step loop, for events emitted outside any host.
    loop_ms: AtomicU64,
    hosts: Mutex<Hosts>,
    /// Live runs stamp events with real time since the case began instead of virtual time.
    live: Option<LiveClock>,
}

/// The hosts announced so far, and which runtime is which host.
#[derive(Debug, Default)]
struct Hosts {
    names: Vec<String>,
    /// (runtime, index into `names`); a host restarted by turmoil has several runtimes.
    runtimes: Vec<(tokio::runtime::Id, usize)>,
}

impl Hosts {
    fn announce(&mut self, name: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let index = self.names.iter().position(|n| n == name).unwrap_or_else(|| {
            self.names.push(name.to_string());
            self.names.len() - 1
        });
        self.runtimes.push((runtime.id(), index));
    }

    /// The host of the current runtime: `None` outside every runtime.
    fn current(&self) -> Option<String> {
        let runtime = tokio::runtime::Handle::try_current().ok()?.id();
        let index = self.runtimes.iter().find(|(id, _)| *id == runtime).map(|&(_, index)| index);
        Some(index.map_or(UNANNOUNCED, |index| self.names[index].as_str()).to_string())
    }
}

/// Handle to a recording: make a layer from it, then take the events.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Shared>);

impl Recorder {
    /// A recorder for a live run: events are stamped with `clock`'s real milliseconds.
    pub fn live(clock: LiveClock) -> Self {
        Self(Arc::new(Shared { live: Some(clock), ..Shared::default() }))
    }

    /// Record an event the engine itself observed (a process starting or exiting), for `host`.
    pub fn record(&self, host: &str, kind: &str, fields: Vec<(String, Value)>) {
        let at_ms = self.0.loop_ms.load(Ordering::Relaxed);
        push(&self.0, TraceEvent { at_ms, host: host.to_string(), kind: kind.to_string(), fields });
    }

    pub fn layer(&self) -> RecordingLayer {
        RecordingLayer(self.0.clone())
    }

    /// A whole subscriber, without a span registry (it records no spans): the runner's choice.
    pub fn subscriber(&self) -> RecordingSubscriber {
        RecordingSubscriber { shared: self.0.clone() }
    }

    /// How many distinct hosts have announced themselves.
    pub fn hosts(&self) -> usize {
        self.0.hosts.lock().unwrap_or_else(|e| e.into_inner()).names.len()
    }

    /// Set the virtual time stamped on events emitted by the step loop itself.
    pub fn set_loop_ms(&self, ms: u64) {
        self.0.loop_ms.store(ms, Ordering::Relaxed);
    }

    pub fn take(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut *self.0.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

pub struct RecordingLayer(Arc<Shared>);

impl<S: Subscriber> Layer<S> for RecordingLayer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        interest(meta)
    }

    // When several threads each have their own subscriber (parallel tests, hunt workers),
    // tracing caches interest as "sometimes" and asks here for every callsite: filter again.
    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        wanted(meta)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        on_event(&self.0, event);
    }
}

/// Records into a [`Recorder`] with no span registry (see [`Recorder::subscriber`]).
pub struct RecordingSubscriber {
    shared: Arc<Shared>,
}

impl Subscriber for RecordingSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        interest(meta)
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        wanted(meta)
    }

    /// Never called: no span is wanted.
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        on_event(&self.shared, event);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// A wanted event: a host announcing itself, or a trace event to append.
fn on_event(shared: &Shared, event: &Event<'_>) {
    let meta = event.metadata();
    if meta.target() == HOST_TARGET {
        let mut visitor = FieldsVisitor::default();
        event.record(&mut visitor);
        if let Some((_, Value::String(name))) = visitor.fields.first() {
            shared.hosts.lock().unwrap_or_else(|e| e.into_inner()).announce(name);
        }
    } else if meta.target() == TARGET {
        let host = shared.hosts.lock().unwrap_or_else(|e| e.into_inner()).current();
        record_event(shared, event, host);
    }
}

/// Append one trace event, stamped with virtual time and its host.
fn record_event(shared: &Shared, event: &Event<'_>, host: Option<String>) {
    let mut visitor = FieldsVisitor::default();
    event.record(&mut visitor);
    let mut kind = String::new();
    visitor.fields.retain(|(name, value)| match (name.as_str(), value) {
        ("kind", Value::String(k)) => {
            kind = k.clone();
            false
        }
        _ => true,
    });
    let at_ms = match turmoil::sim_elapsed() {
        Some(elapsed) => u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        None => shared.loop_ms.load(Ordering::Relaxed),
    };
    let host = host.unwrap_or_else(|| host::SIM.to_string());
    push(shared, TraceEvent { at_ms, host, kind, fields: visitor.fields });
}

/// Append an event. A live run stamps it with real time under the lock, so events from the
/// threads of a case are in time order.
fn push(shared: &Shared, mut event: TraceEvent) {
    let mut events = shared.events.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(clock) = shared.live {
        event.at_ms = clock.ms();
    }
    events.push(event);
}

/// The only callsites recorded: trace-target events and host announcements. No span.
fn wanted(meta: &Metadata<'_>) -> bool {
    meta.is_event() && (meta.target() == TARGET || meta.target() == HOST_TARGET)
}

fn interest(meta: &Metadata<'_>) -> tracing::subscriber::Interest {
    if wanted(meta) {
        tracing::subscriber::Interest::always()
    } else {
        tracing::subscriber::Interest::never()
    }
}

/// Collects fields as JSON values, in declaration order.
#[derive(Default)]
struct FieldsVisitor {
    fields: Vec<(String, Value)>,
}

impl Visit for FieldsVisitor {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.push((field.name().to_string(), Value::from(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.push((field.name().to_string(), Value::from(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.push((field.name().to_string(), Value::from(value)));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields.push((field.name().to_string(), Value::from(value)));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields.push((field.name().to_string(), Value::from(format!("{value:?}"))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_under_test::emit;
    use bridge_under_test::events::kind;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn foreign_events_are_dropped_while_other_threads_record_too() {
        // A second subscriber on another thread makes tracing ask `enabled` per callsite.
        let other = std::thread::Builder::new()
            .spawn(|| {
                let subscriber = tracing_subscriber::registry().with(Recorder::default().layer());
                tracing::subscriber::with_default(subscriber, || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                });
            })
            .unwrap();
        let recorder = Recorder::default();
        let subscriber = tracing_subscriber::registry().with(recorder.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "turmoil", "TCP SYN");
            tracing::info!(kind = "x", "no trace target");
            emit!(kind::SSE_CONNECT, gen = 1u64, attempt = 0u64);
        });
        other.join().unwrap();
        let kinds: Vec<String> = recorder.take().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["sse.connect"]);
    }

    #[test]
    fn events_are_stamped_with_the_host_that_announced_its_runtime() {
        let recorder = Recorder::default();
        tracing::subscriber::with_default(recorder.subscriber(), || {
            let mut sim = turmoil::Builder::new().build();
            crate::family::host(&mut sim, "server", || async {
                emit!(kind::SSE_CONNECT, gen = 1u64, attempt = 0u64);
                std::future::pending().await
            });
            sim.host("raw", || async {
                emit!(kind::SSE_CONNECT, gen = 2u64, attempt = 0u64);
                std::future::pending().await
            });
            crate::family::client(&mut sim, "client", async {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                emit!(kind::SSE_CLOSED, gen = 3u64, reason = "done");
                Ok(())
            });
            sim.run().unwrap();
            emit!(kind::SSE_CLOSED, gen = 4u64, reason = "after");
        });
        let mut hosts: Vec<(String, String)> = recorder
            .take()
            .into_iter()
            .map(|e| (e.host, e.fields[0].1.to_string()))
            .collect();
        hosts.sort();
        let expected = [("?", "2"), ("client", "3"), ("server", "1"), ("sim", "4")];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(h, g)| (h.to_string(), g.to_string())).collect();
        assert_eq!(hosts, expected);
        assert_eq!(recorder.hosts(), 2, "only announced hosts count");
    }

    #[test]
    fn the_subscriber_records_like_the_layer() {
        let recorder = Recorder::default();
        recorder.set_loop_ms(70);
        tracing::subscriber::with_default(recorder.subscriber(), || {
            tracing::info!(kind = "ignored", "not the trace target");
            emit!(kind::SSE_CLOSED, gen = 2u64, reason = "idle");
        });
        let events = recorder.take();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].line(), "       70 sim      sse.closed gen=2 reason=idle");
    }

    #[test]
    fn records_only_trace_events_with_fields_in_order() {
        let recorder = Recorder::default();
        recorder.set_loop_ms(70);
        let subscriber = tracing_subscriber::registry().with(recorder.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(kind = "ignored", "not the trace target");
            emit!(kind::SSE_CLOSED, gen = 2u64, reason = "idle");
        });
        let events = recorder.take();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].line(), "       70 sim      sse.closed gen=2 reason=idle");
    }
}
