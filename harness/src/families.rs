//! The registry: every family the harness knows, and how a name, a switch or a trace finds its
//! family. `list`, `hunt`, `replay`, `check`, `view`, `bench`, `hashes` and tokens all read
//! [`FAMILIES`]; a new family is a module and one line here.

use crate::family::Family;
use crate::trace::Trace;

/// Every family, in the order `list`, `hunt`, `bench` and `hashes` go through them.
pub const FAMILIES: &[&Family] = &[
    &crate::relay::RELAY,
    &crate::channel::CHANNEL,
    &crate::daemon::DAEMON,
    &crate::sdk::SDK,
    &crate::sdk::SDK_RMCP,
];

/// The family of this name.
pub fn named(name: &str) -> Result<&'static Family, String> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
            format!("unknown family `{name}`; valid: {}", names.join(" "))
        })
}

/// The family that has this bug switch.
pub fn owning(switch: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.switches.contains(&switch))
}

/// The family a trace names in the `family` field of its `run.spec` event.
pub fn of_trace(trace: &Trace) -> Result<&'static Family, String> {
    let spec = trace
        .first(bridge_under_test::events::kind::RUN_SPEC)
        .ok_or("the trace has no run.spec event (pass --family to name the family)")?;
    let name = spec.text("family");
    if name.is_empty() {
        return Err("the run.spec event has no family field (pass --family)".to_string());
    }
    named(&name)
}
