//! Shrinking a live failure. A real bridge is not deterministic, so a candidate is kept when a run
//! of it still breaks the oracle (an existence proof), and the shrunk case's reproduction rate is
//! measured afterwards by whoever asked.
//!
//! Two passes share one budget of runs:
//! - the token's value tree (proptest's own simplification: fewer steps, milder faults), taken
//!   only when the case is still the one its token generates (a saved case may already be shrunk);
//! - then each remaining fault entry dropped in turn, last first: what is left is the faults the
//!   failure needs;
//! - then each remaining step but the handshake dropped in turn, last first (a per-call fault on
//!   a dropped step goes with it; the others are renumbered), so a saved or hand-written case,
//!   which has no value tree, sheds the steps the failure does not need too.

use proptest::strategy::ValueTree;

use bridge_under_test::relay::client::Op;

use super::{generate, Case};

/// How many moves through the value tree one shrink makes at most, runs or not: candidates
/// passed over unrun cost no run, and the tree is finite but large.
const MAX_TREE_MOVES: usize = 10_000;

/// A shrunk case, the evidence that it still fails, and the runs spent.
pub struct Shrunk<J> {
    pub case: Case,
    pub failed: J,
    pub runs: usize,
}

/// Shrink `case` with at most `budget` runs of `attempt`, which runs a candidate and returns
/// `Some(evidence)` when it still breaks the oracle. `None` when nothing smaller failed.
pub fn shrink<J, E>(case: &Case, budget: usize, mut attempt: impl FnMut(&Case) -> Result<Option<J>, E>) -> Result<Option<Shrunk<J>>, E> {
    let mut best: Option<(Case, J)> = None;
    let mut runs = 0;
    // The tree alone can spend any budget (it halves every time and onset); the drop pass is
    // left a run per fault entry.
    let tree_budget = budget - case.scenario.faults.len().min(budget / 2);
    let mut tree = generate(case.seed);
    // The scenario's tree is a flat map (the swarm profile picks the fault kinds), so simplifying
    // the outer value draws a new plan, which may be longer than the one kept: a candidate with
    // more faults or more steps than the smallest failure so far is passed over unrun, as if it
    // passed (live token 16f085fc2a4c8752 on mcp-remote kept 0 faults, then 3).
    let size = |case: &Case| (case.scenario.faults.len(), case.scenario.script.steps.len());
    let mut smallest = size(case);
    let mut moves = 0;
    if tree.current() == case.scenario && tree.simplify() {
        while runs < tree_budget && moves < MAX_TREE_MOVES {
            moves += 1;
            let candidate = Case { seed: case.seed, scenario: tree.current() };
            let (faults, steps) = size(&candidate);
            if faults > smallest.0 || steps > smallest.1 {
                if !tree.complicate() {
                    break;
                }
                continue;
            }
            runs += 1;
            let more = match attempt(&candidate)? {
                Some(evidence) => {
                    smallest = size(&candidate);
                    best = Some((candidate, evidence));
                    tree.simplify()
                }
                None => tree.complicate(),
            };
            if !more {
                break;
            }
        }
    }
    let mut current = best.as_ref().map_or_else(|| case.clone(), |(case, _)| case.clone());
    let mut index = current.scenario.faults.len();
    while index > 0 && runs < budget {
        index -= 1;
        let mut candidate = current.clone();
        candidate.scenario.faults.remove(index);
        runs += 1;
        if let Some(evidence) = attempt(&candidate)? {
            current = candidate.clone();
            best = Some((candidate, evidence));
        }
    }
    let mut index = current.scenario.script.steps.len();
    while index > 0 && runs < budget {
        index -= 1;
        if matches!(current.scenario.script.steps[index].op, Op::Initialize | Op::Initialized) {
            continue;
        }
        let candidate = without_step(&current, index);
        runs += 1;
        if let Some(evidence) = attempt(&candidate)? {
            current = candidate.clone();
            best = Some((candidate, evidence));
        }
    }
    Ok(best.map(|(case, failed)| Shrunk { case, failed, runs }))
}

/// `case` without its step `index`: a fault on that step goes with it, a fault on a later step
/// follows its step to its new place.
fn without_step(case: &Case, index: usize) -> Case {
    let mut smaller = case.clone();
    smaller.scenario.script.steps.remove(index);
    smaller.scenario.faults.retain_mut(|fault| match fault.step_mut() {
        Some(step) if *step == index => false,
        Some(step) => {
            if *step > index {
                *step -= 1;
            }
            true
        }
        None => true,
    });
    smaller
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::faults::RelayFault;

    /// A stand-in bridge that fails exactly when the plan holds a fault `needed` picks.
    fn fails_with(needed: impl Fn(&RelayFault) -> bool) -> impl FnMut(&Case) -> Result<Option<usize>, ()> {
        move |case| Ok(case.scenario.faults.iter().any(&needed).then_some(case.scenario.faults.len()))
    }

    /// A generated case whose plan holds a fault `pick` picks and at least `others` others.
    fn case_with(pick: impl Fn(&RelayFault) -> bool, others: usize) -> Case {
        (0..4_000).map(|index| super::super::case(11, index)).find(|case| case.scenario.faults.iter().any(&pick) && case.scenario.faults.len() > others).expect("no such case in 4 000")
    }

    fn is_restart(fault: &RelayFault) -> bool {
        matches!(fault, RelayFault::RelayerBounce { .. })
    }

    #[test]
    fn shrinking_keeps_only_the_fault_the_failure_needs() {
        let case = case_with(is_restart, 3);
        let shrunk = shrink(&case, 200, fails_with(is_restart)).unwrap().expect("nothing smaller failed");
        assert_eq!(shrunk.case.scenario.faults.len(), 1, "{:?}", shrunk.case.scenario.faults);
        assert!(is_restart(&shrunk.case.scenario.faults[0]));
        assert_eq!(shrunk.failed, 1, "the evidence is the kept candidate's");
        assert_eq!(shrunk.case.seed, case.seed);
        assert!(shrunk.runs <= 200);
    }

    fn handshake(case: &Case) -> usize {
        case.scenario.script.steps.iter().filter(|step| matches!(step.op, Op::Initialize | Op::Initialized)).count()
    }

    #[test]
    fn a_saved_case_is_shrunk_by_dropping_faults_then_steps_within_the_budget() {
        // Not the case its token generates (as a saved, already shrunk case is not): the value
        // tree is not taken; dropping entries is.
        let mut case = case_with(is_restart, 3);
        case.scenario.script.steps.pop();
        let faults = case.scenario.faults.len();
        let steps = case.scenario.script.steps.len();
        let mut runs = 0;
        let shrunk = shrink(&case, 200, |candidate| {
            runs += 1;
            if runs <= faults {
                assert_eq!(candidate.scenario.script, case.scenario.script, "faults are dropped first, the script kept");
            }
            fails_with(is_restart)(candidate)
        })
        .unwrap()
        .expect("nothing smaller failed");
        assert_eq!(runs, faults + steps - handshake(&case), "one run per fault entry, then one per step but the handshake");
        assert_eq!(shrunk.case.scenario.faults.iter().filter(|f| is_restart(f)).count(), shrunk.case.scenario.faults.len());
        assert_eq!(shrunk.case.scenario.script.steps.len(), handshake(&case), "the failure needs no step but the handshake");

        let mut spent = 0;
        let bounded = shrink(&case, 2, |candidate| {
            spent += 1;
            fails_with(is_restart)(candidate)
        });
        assert!(bounded.is_ok());
        assert_eq!(spent, 2, "the budget bounds the runs");
    }

    #[test]
    fn a_dropped_step_takes_its_faults_with_it_and_later_faults_follow_their_step() {
        // A failure that needs the slow tool on one call (known by its id): shrinking must keep
        // that call, and the fault must still name it after the steps before it are gone.
        // A saved case (its script's end moved), so the value tree, which draws new plans, is
        // not taken.
        let mut case = (0..4_000)
            .map(|index| super::super::case(11, index))
            .find(|case| {
                let steps = &case.scenario.script.steps;
                case.scenario.faults.iter().any(|f| matches!(f, RelayFault::SlowTool { step, .. } if *step + 1 < steps.len() && *step > 2))
            })
            .expect("no case with a slow tool on a middle step in 4 000");
        case.scenario.script.end_at_ms += 1;
        let slow_id = |case: &Case| {
            case.scenario.faults.iter().find_map(|f| match f {
                RelayFault::SlowTool { step, .. } => Some(case.scenario.script.steps[*step].id),
                _ => None,
            })
        };
        let wanted = slow_id(&case).unwrap();
        let shrunk = shrink(&case, 500, |candidate| Ok::<_, ()>((slow_id(candidate) == Some(wanted)).then_some(())))
            .unwrap()
            .expect("nothing smaller failed");
        let steps = &shrunk.case.scenario.script.steps;
        assert_eq!(steps.len(), handshake(&case) + 1, "{steps:?}");
        assert_eq!(shrunk.case.scenario.faults.len(), 1, "{:?}", shrunk.case.scenario.faults);
        assert_eq!(slow_id(&shrunk.case), Some(wanted), "the fault followed its step");

        let index = case.scenario.faults.iter().find_map(|f| match f {
            RelayFault::SlowTool { step, .. } => Some(*step),
            _ => None,
        });
        let gone = without_step(&case, index.unwrap());
        assert!(gone.scenario.faults.len() < case.scenario.faults.len(), "the fault on the dropped step went with it");
        assert_eq!(gone.scenario.script.steps.len(), case.scenario.script.steps.len() - 1);
    }

    #[test]
    fn no_candidate_run_is_larger_than_the_smallest_failure_so_far() {
        for index in 0..40 {
            let case = super::super::case(13, index);
            let mut smallest = (case.scenario.faults.len(), case.scenario.script.steps.len());
            let shrunk = shrink(&case, 40, |candidate| {
                let size = (candidate.scenario.faults.len(), candidate.scenario.script.steps.len());
                assert!(size.0 <= smallest.0 && size.1 <= smallest.1, "case {index}: ran {size:?} after a failure of {smallest:?}");
                smallest = size;
                Ok::<_, ()>(Some(()))
            });
            assert!(shrunk.unwrap().is_some());
        }
    }

    #[test]
    fn nothing_is_returned_when_no_candidate_fails() {
        let case = case_with(is_restart, 1);
        let mut runs = 0;
        let shrunk = shrink(&case, 30, |_| {
            runs += 1;
            Ok::<Option<()>, ()>(None)
        });
        assert!(shrunk.unwrap().is_none());
        assert!(runs > 0 && runs <= 30);
    }
}
