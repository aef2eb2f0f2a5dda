//! The layout of a trace's sequence diagram, as plain data: lanes, rows, arrows, folded runs,
//! fault windows, violations. The renderer only turns it into SVG; tests read it directly.

use crate::trace::{Trace, Violation};

use super::correlate::{self, Message};
use super::faults::{self, Window};
use super::fold::{self, Run};
use super::lanes;
use super::timeline::{self, Timeline};

/// Width of the time gutter on the left, px.
pub const GUTTER: u32 = 80;
/// Width of one lane, px.
pub const LANE_W: u32 = 170;

#[derive(Debug, Clone)]
pub struct Layout {
    pub lanes: Vec<String>,
    /// The lane of each event.
    pub lane_of: Vec<usize>,
    pub messages: Vec<Message>,
    pub runs: Vec<Run>,
    /// For each event, the run it belongs to.
    pub run_of: Vec<Option<usize>>,
    pub timeline: Timeline,
    pub windows: Vec<Window>,
    pub heal: Option<usize>,
    pub violations: Vec<Violation>,
}

impl Layout {
    pub fn new(trace: &Trace, violations: &[Violation]) -> Self {
        let lanes = lanes::lanes(trace);
        let lane_of = lanes::lane_of(trace, &lanes);
        let runs = fold::runs(trace);
        let mut run_of = vec![None; trace.events.len()];
        let mut hidden = vec![false; trace.events.len()];
        for (number, run) in runs.iter().enumerate() {
            for (position, &event) in run.events.iter().enumerate() {
                run_of[event] = Some(number);
                hidden[event] = position > 0;
            }
        }
        // A violation's own event keeps its row, even inside a run.
        for violation in violations {
            if let Some(flag) = hidden.get_mut(violation.event_index) {
                *flag = false;
            }
        }
        let timeline = timeline::layout(trace, &hidden);
        let messages = correlate::messages(trace);
        let (windows, heal) = faults::windows(trace);
        Layout {
            lanes,
            lane_of,
            messages,
            runs,
            run_of,
            timeline,
            windows,
            heal,
            violations: violations.to_vec(),
        }
    }

    /// The x of a lane's centre line.
    pub fn lane_x(&self, lane: usize) -> u32 {
        GUTTER + LANE_W * lane as u32 + LANE_W / 2
    }

    /// The x of an event's lane.
    pub fn x(&self, event: usize) -> u32 {
        self.lane_x(self.lane_of[event])
    }

    pub fn y(&self, event: usize) -> u32 {
        self.timeline.y[event]
    }

    /// The width of the lanes' area (violation notes are written to its right).
    pub fn lanes_width(&self) -> u32 {
        GUTTER + LANE_W * self.lanes.len() as u32
    }
}
