//! A family's scenario inside a simulation: every host it adds goes through [`host`] or
//! [`client`], and its [`Driver`] applies its fault plan between steps.

use std::future::Future;

use super::{Scheduled, SimParams};
use crate::recorder::announce;

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

/// A family's scenario set up inside a simulation.
pub trait Driver {
    /// Record the spec the family's checkers judge against (a `run.spec` event).
    fn emit_spec(&self, params: &SimParams);
    /// Every fault phase, in time order (stable for equal times).
    fn schedule(&self) -> Vec<Scheduled>;
    /// Whether the moment an anchored start (`hold_ms > 0`) waits for has come since it fell
    /// due. Asked between steps while it waits.
    fn anchor_met(&self, _scheduled: &Scheduled) -> bool {
        true
    }
    /// Apply one phase of a fault, recording a `fault.injected` event.
    fn apply(&self, scheduled: &Scheduled, sim: &mut turmoil::Sim<'_>);
    /// Stop injecting and repair everything: liveness is judged after this.
    fn heal(&self, sim: &mut turmoil::Sim<'_>);
}
