//! The page: a header (token, scenario, trace hash, the violations with jump links, the request
//! id filter), the diagram as one inline SVG, and a panel with the clicked event's fields. One
//! self-contained file: the CSS and the script are inlined, nothing is fetched.

use std::fmt::Write as _;

use crate::trace::{Trace, Violation};

use super::correlate::request_id;
use super::layout::{Layout, GUTTER, LANE_W};
use super::timeline::{self, ROW_H};

/// What the header says about the run.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The token, or where the trace came from.
    pub title: String,
    /// The scenario's summary (steps, faults, virtual time).
    pub summary: String,
    pub hash: u64,
}

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");
/// How far right of the last lane's line the notes (heal, violations) start, past the captions.
const NOTES_GAP: u32 = 230;
/// Longest violation detail written beside the diagram (the list at the top has all of it).
const NOTE_CHARS: usize = 110;

/// Escape text for HTML (element content and double-quoted attributes).
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn clip(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        let mut out: String = text.chars().take(chars).collect();
        out.push('…');
        out
    }
}

/// A short text beside an event's dot: its kind and the fields that tell events apart.
fn caption(trace: &Trace, index: usize) -> String {
    let event = &trace.events[index];
    let mut out = event.kind.clone();
    for name in ["id", "fault", "phase", "status", "source", "reason", "outcome", "map", "pid", "gen"] {
        let value = event.text(name);
        if !value.is_empty() {
            write!(out, " {name}={}", clip(&value, 24)).expect("write to String");
        }
    }
    if event.get("msg").is_some() {
        let id = request_id(event);
        let msg = crate::check::message(event);
        let method = msg.get("method").and_then(serde_json::Value::as_str).unwrap_or("");
        if !method.is_empty() {
            // `notifications/claude/channel/permission_request` reads as its last two parts.
            let parts: Vec<&str> = method.rsplitn(3, '/').collect();
            let short = if method.len() > 28 && parts.len() == 3 { format!("…{}/{}", parts[1], parts[0]) } else { method.to_string() };
            write!(out, " {}", clip(&short, 32)).expect("write to String");
        }
        if !id.is_empty() {
            write!(out, " #{}", clip(&id, 16)).expect("write to String");
        }
    }
    clip(&out, 44)
}

/// The whole page for a trace and its violations.
pub fn page(trace: &Trace, violations: &[Violation], header: &Header) -> String {
    let layout = Layout::new(trace, violations);
    let mut out = String::with_capacity(1024 + trace.events.len() * 600);
    let width = layout.lanes_width() + NOTES_GAP + 760;
    let height = layout.timeline.height;
    let title = esc(&header.title);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>trace {title}</title>\
         <style>{CSS}</style></head>\n<body data-events=\"{}\" data-messages=\"{}\" data-lanes=\"{}\">\n",
        trace.events.len(),
        layout.messages.len(),
        layout.lanes.len()
    )
    .expect("write to String");
    header_html(&mut out, trace, &layout, header);
    // Lane names stay in view while the diagram scrolls.
    write!(out, "<div id=\"lane-heads\" style=\"width:{width}px\">").expect("write to String");
    for (lane, host) in layout.lanes.iter().enumerate() {
        let x = layout.lane_x(lane) - LANE_W / 2;
        write!(out, "<span class=\"lane-head\" style=\"left:{x}px;width:{LANE_W}px\">{}</span>", esc(host)).expect("write");
    }
    out.push_str("</div>\n<div id=\"main\"><div id=\"diagram\">");
    write!(
        out,
        "<svg id=\"seq\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\"><defs><marker id=\"ah\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>"
    )
    .expect("write to String");
    bands(&mut out, trace, &layout);
    lanes(&mut out, &layout, height);
    runs(&mut out, trace, &layout);
    messages(&mut out, trace, &layout);
    events(&mut out, trace, &layout);
    markers(&mut out, &layout);
    out.push_str("</svg></div>\n<aside id=\"panel\"><h2>Event</h2><div id=\"fields\">Click or hover an event to see all its fields.</div></aside></div>\n");
    // Every event's fields, for the panel: the JSONL lines as one array.
    out.push_str("<script type=\"application/json\" id=\"trace-data\">[");
    for (index, event) in trace.events.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&crate::jsonl::line(event).replace("</", "<\\/"));
    }
    out.push_str("]</script>\n<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</body></html>\n");
    out
}

fn header_html(out: &mut String, trace: &Trace, layout: &Layout, header: &Header) {
    write!(
        out,
        "<header id=\"header\"><h1>{}</h1><dl>\
         <dt>token</dt><dd id=\"token\">{}</dd>\
         <dt>scenario</dt><dd id=\"summary\">{}</dd>\
         <dt>trace-hash</dt><dd id=\"trace-hash\">{:016x}</dd>\
         <dt>drawn</dt><dd>{} events on {} lanes, {} messages, {} folded runs, {} fault windows, {} idle spans compressed</dd></dl>",
        esc(&header.title),
        esc(&header.title),
        esc(&header.summary),
        header.hash,
        trace.events.len(),
        layout.lanes.len(),
        layout.messages.len(),
        layout.runs.len(),
        layout.windows.len(),
        layout.timeline.idle.len()
    )
    .expect("write to String");
    write!(out, "<section id=\"violations\"><h2>Violations ({})</h2>", layout.violations.len()).expect("write");
    if layout.violations.is_empty() {
        out.push_str("<p class=\"clean\">none: every checker passed</p>");
    } else {
        out.push_str("<ol>");
        for (number, violation) in layout.violations.iter().enumerate() {
            write!(
                out,
                "<li><a class=\"jump\" href=\"#ev-{0}\" data-ev=\"{0}\" id=\"violation-{1}\">{2}</a></li>",
                violation.event_index,
                number,
                esc(&violation.to_string())
            )
            .expect("write to String");
        }
        out.push_str("</ol>");
    }
    out.push_str(
        "</section><div id=\"controls\"><label>request id <input id=\"filter\" type=\"search\" \
         placeholder=\"e.g. 1 or a1.1\"></label> <span id=\"filter-count\"></span>\
         <span class=\"legend\"><span class=\"sw fault\"></span>fault window <span class=\"sw heal\"></span>heal \
         <span class=\"sw run\"></span>folded frames <span class=\"sw idle\"></span>idle span compressed \
         <span class=\"sw viol\"></span>violation</span></div></header>\n",
    );
}

fn bands(out: &mut String, trace: &Trace, layout: &Layout) {
    let right = layout.lanes_width();
    out.push_str("<g id=\"bands\">");
    for idle in &layout.timeline.idle {
        write!(
            out,
            "<g class=\"idle\"><rect x=\"0\" y=\"{}\" width=\"{right}\" height=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
            idle.y,
            timeline::IDLE_H - 4,
            GUTTER + 8,
            idle.y + 13,
            esc(&idle.label())
        )
        .expect("write to String");
    }
    for (number, window) in layout.windows.iter().enumerate() {
        let top = layout.y(window.start).saturating_sub(ROW_H / 2);
        let bottom = window.end.map_or(top + ROW_H, |end| layout.y(end) + ROW_H / 2);
        let detail = trace.events[window.start].text("detail");
        let kind = if window.end.is_some() { "fault" } else { "fault point" };
        // Overlapping windows: each name a little further right.
        let text_x = GUTTER + 4 + (number as u32 % 4) * 14;
        write!(
            out,
            "<g class=\"{kind}\" data-fault=\"{}\"><title>{}</title><rect x=\"{GUTTER}\" y=\"{top}\" width=\"{}\" height=\"{}\"/>\
             <text x=\"{text_x}\" y=\"{}\">{}</text></g>",
            esc(&window.name),
            esc(&format!("{} {}", window.name, detail)),
            right - GUTTER,
            (bottom - top).max(ROW_H),
            top + 12,
            esc(&window.name)
        )
        .expect("write to String");
    }
    if let Some(heal) = layout.heal {
        let y = layout.y(heal);
        write!(
            out,
            "<g class=\"heal\" id=\"heal\"><line x1=\"0\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/><text x=\"{}\" y=\"{}\">heal: every fault repaired at {} ms</text></g>",
            right + NOTES_GAP,
            right + NOTES_GAP + 6,
            y + 4,
            trace.events[heal].at_ms
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}

fn lanes(out: &mut String, layout: &Layout, height: u32) {
    out.push_str("<g id=\"lanes\">");
    for (lane, host) in layout.lanes.iter().enumerate() {
        let x = layout.lane_x(lane);
        write!(
            out,
            "<g class=\"lane\" data-host=\"{0}\"><title>{0}</title><line x1=\"{x}\" y1=\"20\" x2=\"{x}\" y2=\"{height}\"/></g>",
            esc(host)
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}

fn runs(out: &mut String, trace: &Trace, layout: &Layout) {
    out.push_str("<g id=\"runs\">");
    for run in &layout.runs {
        let first = run.events[0];
        let last = run.events[run.events.len() - 1];
        let x = layout.x(first);
        let top = layout.y(first);
        let bottom = layout.y(last).max(top) + 6;
        write!(
            out,
            "<g class=\"run\" data-rid=\"{}\" data-ev=\"{first}\" data-count=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"8\" height=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text></g>",
            esc(&request_id(&trace.events[first])),
            run.events.len(),
            x - 4,
            top - 4,
            bottom - top + 4,
            x + 10,
            top + 14,
            esc(&run.label)
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}

fn messages(out: &mut String, trace: &Trace, layout: &Layout) {
    out.push_str("<g id=\"msgs\">");
    for message in &layout.messages {
        let (x1, y1) = (layout.x(message.send), layout.y(message.send));
        let (x2, y2) = (layout.x(message.recv), layout.y(message.recv));
        // Stop short of the receiving dot so the head shows.
        let x2 = if x2 > x1 { x2 - 5 } else { x2 + 5 };
        let mut rid = request_id(&trace.events[message.send]);
        if rid.is_empty() {
            rid = request_id(&trace.events[message.recv]);
        }
        let (mx, my) = ((x1 + x2) / 2, (y1 + y2) / 2);
        write!(
            out,
            "<g class=\"msg hop-{}\" data-rid=\"{}\" data-send=\"{}\" data-recv=\"{}\"><line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" marker-end=\"url(#ah)\"/>\
             <text x=\"{mx}\" y=\"{}\">{}</text></g>",
            message.hop.name(),
            esc(&rid),
            message.send,
            message.recv,
            my.saturating_sub(3),
            esc(&clip(&message.label, 30))
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}

fn events(out: &mut String, trace: &Trace, layout: &Layout) {
    out.push_str("<g id=\"events\">");
    let mut last_time: Option<u64> = None;
    for (index, event) in trace.events.iter().enumerate() {
        if !layout.timeline.drawn[index] {
            continue;
        }
        let (x, y) = (layout.x(index), layout.y(index));
        let time = if last_time == Some(event.at_ms) {
            String::new()
        } else {
            format!("<text class=\"t\" x=\"{}\" y=\"{}\">{}</text>", GUTTER - 6, y + 4, event.at_ms)
        };
        last_time = Some(event.at_ms);
        let folded = if layout.run_of[index].is_some() { " folded" } else { "" };
        write!(
            out,
            "<g class=\"ev{folded}\" id=\"ev-{index}\" data-i=\"{index}\" data-rid=\"{}\">{time}<circle cx=\"{x}\" cy=\"{y}\" r=\"4\"/>\
             <text x=\"{}\" y=\"{}\">{}</text></g>",
            esc(&request_id(event)),
            x + 7,
            y + 4,
            esc(&caption(trace, index))
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}

fn markers(out: &mut String, layout: &Layout) {
    let right = layout.lanes_width() + NOTES_GAP;
    out.push_str("<g id=\"markers\">");
    for (number, violation) in layout.violations.iter().enumerate() {
        let index = violation.event_index.min(layout.lane_of.len().saturating_sub(1));
        if layout.lane_of.is_empty() {
            break;
        }
        let (x, y) = (layout.x(index), layout.y(index));
        write!(
            out,
            "<g class=\"violation-marker\" data-ev=\"{index}\" data-invariant=\"{0}\" id=\"marker-{number}\"><title>{1}</title>\
             <rect x=\"0\" y=\"{2}\" width=\"{right}\" height=\"{ROW_H}\"/><circle cx=\"{x}\" cy=\"{y}\" r=\"8\"/>\
             <line x1=\"{3}\" y1=\"{y}\" x2=\"{right}\" y2=\"{y}\"/>\
             <text x=\"{4}\" y=\"{5}\"><tspan class=\"inv\">⚠ {0}</tspan> {6}</text></g>",
            esc(&violation.invariant),
            esc(&violation.to_string()),
            y - ROW_H / 2,
            x + 8,
            right + 6,
            y + 4,
            esc(&clip(&violation.detail, NOTE_CHARS))
        )
        .expect("write to String");
    }
    out.push_str("</g>\n");
}
