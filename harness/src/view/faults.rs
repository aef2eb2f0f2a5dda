//! Fault windows and the heal point, from the `fault.injected` events of the `sim` lane.

use crate::trace::Trace;

/// One injected fault: from its start event to its end event (a per-call fault has no end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub name: String,
    pub start: usize,
    pub end: Option<usize>,
}

/// The fault windows of a trace, in order of onset, and the heal event if any.
pub fn windows(trace: &Trace) -> (Vec<Window>, Option<usize>) {
    let mut out: Vec<Window> = Vec::new();
    let mut heal = None;
    for (index, event) in trace.of_kind("fault.injected") {
        let name = event.text("fault");
        if name == "heal" {
            heal = heal.or(Some(index));
            continue;
        }
        if event.text("phase") == "end" {
            let detail = event.text("detail");
            let open = out
                .iter_mut()
                .find(|w| w.end.is_none() && w.name == name && trace.events[w.start].text("detail") == detail);
            if let Some(window) = open {
                window.end = Some(index);
                continue;
            }
        }
        out.push(Window { name, start: index, end: None });
    }
    (out, heal)
}
