//! What every family provides to the engine: a driver that sets its hosts up in a simulation and
//! applies its fault plan between steps. A new family adds a variant to
//! [`FamilyScenario`](crate::scenario::FamilyScenario) and a module like `relay/`.

use std::future::Future;

use crate::recorder::announce;
use crate::scenario::SimParams;

/// Add a host to the simulation. Every host a family sets up goes through here (or
/// [`client`]): its software first announces its name, which is how the recorder attributes
/// trace events to hosts, and how many hosts a run had.
pub fn host<'a, F, Fut>(sim: &mut turmoil::Sim<'a>, name: &'static str, software: F)
where
    F: Fn() -> Fut + 'a,
    Fut: Future<Output = turmoil::Result> + 'static,
{
    sim.host(name, move || {
        // turmoil calls this inside the host's new runtime, at start and at every restart.
        announce(name);
        software()
    });
}

/// Add a client (a host whose software ends the run when it is done): see [`host`].
pub fn client<Fut>(sim: &mut turmoil::Sim<'_>, name: &'static str, software: Fut)
where
    Fut: Future<Output = turmoil::Result> + 'static,
{
    sim.client(name, async move {
        announce(name);
        software.await
    });
}

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
}

/// A family's scenario set up inside a simulation.
pub trait Driver {
    /// Record the spec the family's checkers judge against (a `run.spec` event).
    fn emit_spec(&self, params: &SimParams);
    /// Every fault phase, in time order (stable for equal times).
    fn schedule(&self) -> Vec<Scheduled>;
    /// Apply one phase of a fault, recording a `fault.injected` event.
    fn apply(&self, scheduled: &Scheduled, sim: &mut turmoil::Sim<'_>);
    /// Stop injecting and repair everything: liveness is judged after this.
    fn heal(&self, sim: &mut turmoil::Sim<'_>);
}

/// Sort fault phases by time, keeping plan order for equal times.
pub fn sorted(mut schedule: Vec<Scheduled>) -> Vec<Scheduled> {
    schedule.sort_by_key(|s| s.at_ms);
    schedule
}

/// The schedule of a fault plan, given each fault's window: a start, and an end for windowed
/// faults.
pub fn schedule<F>(faults: &[F], window: impl Fn(&F) -> (u64, Option<u64>)) -> Vec<Scheduled> {
    let mut out = Vec::new();
    for (fault, spec) in faults.iter().enumerate() {
        let (start, end) = window(spec);
        out.push(Scheduled { at_ms: start, fault, phase: Phase::Start });
        if let Some(end) = end {
            out.push(Scheduled { at_ms: end, fault, phase: Phase::End });
        }
    }
    sorted(out)
}
