//! The vertical axis: one row per drawn event in trace order (which is causal), virtual time
//! going down, and every idle span longer than [`IDLE_MS`] compressed into one labelled band, so
//! a four-minute wait is one band, not four screens of nothing.

use crate::trace::Trace;

/// A gap between consecutive events longer than this is drawn as an idle band.
pub const IDLE_MS: u64 = 1_000;
/// Height of one event row, px.
pub const ROW_H: u32 = 18;
/// Height of an idle band, px.
pub const IDLE_H: u32 = 22;
/// Where the first row starts, px (below the lane headers).
pub const TOP: u32 = 40;

/// A compressed idle span: drawn at `y`, from `from_ms` to `to_ms` of virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    pub y: u32,
    pub from_ms: u64,
    pub to_ms: u64,
}

impl Idle {
    pub fn label(&self) -> String {
        format!("⋯ {} idle ({} → {} ms)", duration(self.to_ms - self.from_ms), self.from_ms, self.to_ms)
    }
}

/// Where each event is drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// The y of each event's row. A folded event (not the head of its run) takes the row of the
    /// drawn event before it and gets no row of its own.
    pub y: Vec<u32>,
    /// Whether the event has a row of its own.
    pub drawn: Vec<bool>,
    pub idle: Vec<Idle>,
    pub height: u32,
}

/// Rows for a trace; `hidden[i]` marks a folded event that gets no row.
pub fn layout(trace: &Trace, hidden: &[bool]) -> Timeline {
    let mut y = TOP;
    let mut last_y = TOP;
    let mut latest: Option<u64> = None;
    let mut out = Timeline { y: Vec::with_capacity(trace.events.len()), drawn: Vec::new(), idle: Vec::new(), height: 0 };
    for (index, event) in trace.events.iter().enumerate() {
        let folded = hidden.get(index).copied().unwrap_or(false);
        if !folded {
            if let Some(previous) = latest.filter(|p| event.at_ms > p + IDLE_MS) {
                out.idle.push(Idle { y, from_ms: previous, to_ms: event.at_ms });
                y += IDLE_H;
            }
            last_y = y;
            y += ROW_H;
        }
        out.y.push(last_y);
        out.drawn.push(!folded);
        // Receivers may stamp a tick before their sender: time only moves forward here.
        latest = Some(latest.map_or(event.at_ms, |p| p.max(event.at_ms)));
    }
    out.height = y + ROW_H;
    out
}

/// `4 min 0 s`, `2.5 s`, `750 ms`, `1 h 30 min`.
pub fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{} h {} min", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}
