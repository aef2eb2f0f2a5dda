//! The `tracing` layer that records trace events: only events with the trace target, stamped
//! with virtual time and the name of the turmoil host whose software emitted them. Installed per
//! thread (`tracing::subscriber::with_default`), so parallel runs never mix traces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bridge_under_test::events::{host, TARGET};
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::trace::TraceEvent;

/// turmoil enters a span with this name, and a `name` field, around each host's tick.
const HOST_SPAN: &str = "node";

/// Shared between the layer (which appends) and the runner (which reads the clock it sets).
#[derive(Debug, Default)]
struct Shared {
    events: Mutex<Vec<TraceEvent>>,
    /// Virtual time of the step loop, for events emitted outside any host.
    loop_ms: AtomicU64,
    hosts: Mutex<Hosts>,
}

/// Which host each live turmoil host span stands for. turmoil opens one such span per host per
/// step, so this is the recorder's hot path: no allocation once the names are known.
#[derive(Debug, Default)]
struct Hosts {
    names: Vec<String>,
    by_span: std::collections::BTreeMap<u64, usize>,
}

/// Handle to a recording: make a layer from it, then take the events.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Shared>);

impl Recorder {
    pub fn layer(&self) -> RecordingLayer {
        RecordingLayer(self.0.clone())
    }

    /// A whole subscriber, without a span registry: the runner's choice, since turmoil opens a
    /// host span per host per step and a registry's bookkeeping for each was the harness's
    /// largest overhead over bare turmoil. A host span's id is its interned host index + 1.
    pub fn subscriber(&self) -> RecordingSubscriber {
        RecordingSubscriber { shared: self.0.clone(), entered: Mutex::new(Vec::new()) }
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

impl<S> Layer<S> for RecordingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if wanted(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    // When several threads each have their own subscriber (parallel tests, hunt workers),
    // tracing caches interest as "sometimes" and asks here for every callsite: filter again.
    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        wanted(meta)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if !wanted(attrs.metadata()) {
            return;
        }
        let mut hosts = self.0.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let mut visitor = HostVisitor { hosts: &mut hosts, index: None };
        attrs.record(&mut visitor);
        if let Some(index) = visitor.index {
            hosts.by_span.insert(id.into_u64(), index);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !wanted(event.metadata()) {
            return;
        }
        let host = ctx.current_span().id().and_then(|id| {
            let hosts = self.0.hosts.lock().unwrap_or_else(|e| e.into_inner());
            hosts.by_span.get(&id.into_u64()).map(|&index| hosts.names[index].clone())
        });
        record_event(&self.0, event, host);
    }
}

/// Records into a [`Recorder`] with no span registry (see [`Recorder::subscriber`]).
pub struct RecordingSubscriber {
    shared: Arc<Shared>,
    /// Host indices of the entered host spans, innermost last.
    entered: Mutex<Vec<usize>>,
}

impl Subscriber for RecordingSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if wanted(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        wanted(meta)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut hosts = self.shared.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let mut visitor = HostVisitor { hosts: &mut hosts, index: None };
        attrs.record(&mut visitor);
        Id::from_u64(visitor.index.map_or(u64::MAX, |index| index as u64 + 1))
    }

    fn record(&self, _: &Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        if !wanted(event.metadata()) {
            return;
        }
        let top = self.entered.lock().unwrap_or_else(|e| e.into_inner()).last().copied();
        let host = top.and_then(|index| {
            let hosts = self.shared.hosts.lock().unwrap_or_else(|e| e.into_inner());
            hosts.names.get(index).cloned()
        });
        record_event(&self.shared, event, host);
    }

    fn enter(&self, span: &Id) {
        let index = usize::try_from(span.into_u64() - 1).unwrap_or(usize::MAX);
        self.entered.lock().unwrap_or_else(|e| e.into_inner()).push(index);
    }

    fn exit(&self, _: &Id) {
        self.entered.lock().unwrap_or_else(|e| e.into_inner()).pop();
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
    let event = TraceEvent { at_ms, host, kind, fields: visitor.fields };
    shared.events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
}

/// The only callsites recorded: turmoil's host spans and trace-target events.
fn wanted(meta: &Metadata<'_>) -> bool {
    if meta.is_span() {
        meta.name() == HOST_SPAN && meta.target().starts_with("turmoil")
    } else {
        meta.target() == TARGET
    }
}

/// Finds the `name` field of a host span and interns it.
struct HostVisitor<'a> {
    hosts: &'a mut Hosts,
    index: Option<usize>,
}

impl Visit for HostVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() != "name" {
            return;
        }
        let names = &mut self.hosts.names;
        let index = names.iter().position(|n| n == value).unwrap_or_else(|| {
            names.push(value.to_string());
            names.len() - 1
        });
        self.index = Some(index);
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
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
