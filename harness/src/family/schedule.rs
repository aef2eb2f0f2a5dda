//! The fault schedule: each fault's phases in time order, and the phases still to apply, in
//! the order the runner's step loop applies them.

/// A fault taking effect (`Start`) or ending (`End`, windowed faults only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Start,
    End,
}

/// A scheduled fault phase: fault number `fault` of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    pub at_ms: u64,
    pub fault: usize,
    pub phase: Phase,
    /// For a start anchored to a moment of the workload: the span in which it waits for that
    /// moment (from, until). It starts at the moment if the driver reports one in the span, else
    /// at `until`; a windowed fault's end keeps its distance from the start.
    pub watch: Option<(u64, u64)>,
}

/// Sort fault phases by time, keeping plan order for equal times.
fn sorted(mut schedule: Vec<Scheduled>) -> Vec<Scheduled> {
    schedule.sort_by_key(|s| s.at_ms);
    schedule
}

/// The schedule of a fault plan, given each fault's window: a start, and an end for windowed
/// faults.
pub fn schedule<F>(faults: &[F], window: impl Fn(&F) -> (u64, Option<u64>)) -> Vec<Scheduled> {
    let mut out = Vec::new();
    for (fault, spec) in faults.iter().enumerate() {
        let (start, end) = window(spec);
        out.push(Scheduled {
            at_ms: start,
            fault,
            phase: Phase::Start,
            watch: None,
        });
        if let Some(end) = end {
            out.push(Scheduled {
                at_ms: end,
                fault,
                phase: Phase::End,
                watch: None,
            });
        }
    }
    sorted(out)
}

/// The fault phases still to apply, in the order the step loop applies them: due phases in
/// schedule order, except that an anchored start comes at its moment (or the end of its watch)
/// and a windowed fault's end only after its start.
pub struct Pending {
    phases: Vec<Scheduled>,
}

impl Pending {
    pub fn new(schedule: Vec<Scheduled>) -> Self {
        Self {
            phases: sorted(schedule),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }

    /// Take the next phase to apply at `now_ms`, if one is due. `met` says whether an anchored
    /// start's moment has come (asked only inside its watch).
    pub fn next_due(&mut self, now_ms: u64, met: impl Fn(&Scheduled) -> bool) -> Option<Scheduled> {
        let index = self.phases.iter().position(|s| match (s.phase, s.watch) {
            (Phase::Start, None) => s.at_ms <= now_ms,
            (Phase::Start, Some((from, until))) => now_ms >= until || (now_ms >= from && met(s)),
            (Phase::End, _) => {
                s.at_ms <= now_ms
                    && !self
                        .phases
                        .iter()
                        .any(|p| p.fault == s.fault && p.phase == Phase::Start)
            }
        })?;
        let due = self.phases.remove(index);
        if due.phase == Phase::Start && due.watch.is_some() {
            for end in self.phases.iter_mut().filter(|p| p.fault == due.fault) {
                end.at_ms = now_ms + (end.at_ms - due.at_ms);
            }
            self.phases.sort_by_key(|s| s.at_ms);
        }
        Some(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(pending: &mut Pending, now_ms: u64, met: bool) -> Vec<(usize, Phase)> {
        std::iter::from_fn(|| pending.next_due(now_ms, |_| met))
            .map(|s| (s.fault, s.phase))
            .collect()
    }

    #[test]
    fn an_anchored_start_waits_for_its_moment_and_takes_its_end_along() {
        // Fault 0: a window 100..300 watching from 100; fault 1: a plain onset at 150.
        let mut schedule = schedule(&[(100, Some(300)), (150, None)], |w| *w);
        schedule[0].watch = Some((100, 5_000));
        let mut pending = Pending::new(schedule);
        assert_eq!(
            drain(&mut pending, 90, true),
            vec![],
            "the watch has not begun"
        );
        assert_eq!(drain(&mut pending, 150, false), vec![(1, Phase::Start)]);
        // Its end is due by the plan, but it has not started: nothing.
        assert_eq!(drain(&mut pending, 320, false), vec![]);
        assert_eq!(drain(&mut pending, 400, true), vec![(0, Phase::Start)]);
        // The window keeps its 200 ms.
        assert_eq!(drain(&mut pending, 590, false), vec![]);
        assert_eq!(drain(&mut pending, 600, false), vec![(0, Phase::End)]);
        assert!(pending.is_empty());
    }

    #[test]
    fn an_anchored_start_comes_at_the_end_of_its_watch_without_its_moment() {
        // Watching before its nominal onset: met early, it starts early, and so does its end.
        let mut schedule = schedule(&[(500, Some(700))], |w| *w);
        schedule[0].watch = Some((0, 500));
        let mut early = Pending::new(schedule.clone());
        assert_eq!(drain(&mut early, 50, true), vec![(0, Phase::Start)]);
        assert_eq!(drain(&mut early, 250, false), vec![(0, Phase::End)]);
        let mut late = Pending::new(schedule);
        assert_eq!(drain(&mut late, 490, false), vec![]);
        assert_eq!(drain(&mut late, 500, false), vec![(0, Phase::Start)]);
        assert_eq!(drain(&mut late, 700, false), vec![(0, Phase::End)]);
    }

    #[test]
    fn plain_phases_come_in_time_order() {
        let mut pending = Pending::new(schedule(&[(200, Some(250)), (100, None)], |w| *w));
        assert_eq!(
            drain(&mut pending, 300, false),
            vec![(1, Phase::Start), (0, Phase::Start), (0, Phase::End)]
        );
    }
}
