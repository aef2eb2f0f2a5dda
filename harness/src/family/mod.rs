//! What a family is to the engines and the CLI: the contract each family (`relay/`, `channel/`,
//! `daemon/`, `sdk/`) fulfils once, in its own module (a [`Family`] it declares, and
//! [`FamilyScenario`] for its scenario type), and the only way the simulation engine
//! (`runner.rs`) knows a family. [`crate::families`] lists them.
//!
//! - [`Family`] (here): the family itself, as data: name, switches, generator, checkers, coverage
//!   tables;
//! - `scenario.rs`: [`Scenario`], everything a run depends on, with one family's part of it
//!   behind [`FamilyScenario`] (its hosts, size and switches), and the scenario file format;
//! - `driver.rs`: a family's scenario inside a simulation: the hosts it adds and the faults it
//!   applies between steps ([`Driver`]);
//! - `schedule.rs`: the fault schedule the step loop follows.

mod driver;
mod scenario;
mod schedule;

use proptest::strategy::BoxedStrategy;

use crate::coverage::{Cell, Table};
use crate::schema::McpSchema;
use crate::trace::{Trace, Violation};

pub use driver::{client, host, Driver};
pub use scenario::{FamilyScenario, Scenario, SimParams};
pub use schedule::{schedule, Pending, Phase, Scheduled};

/// A family of systems under test: everything the CLI, the hunt and the engines ask of it, as
/// plain data. Each family declares one (`relay::RELAY`, ...); its scenario type implements
/// [`FamilyScenario`].
pub struct Family {
    /// Its name in tokens, `--family`, `list` and its trace's `run.spec`.
    pub name: &'static str,
    /// Its bug switches, as MODEL.md spells them, in token order.
    pub switches: &'static [&'static str],
    /// The strategy for one case, seeded `seed`, with the named switches on (names validated
    /// by the token): the family's scenario plus the simulator parameters that suit it.
    pub strategy: fn(bugs: &[String], seed: u64) -> BoxedStrategy<Scenario>,
    /// The `family` tag of its scenarios in a scenario file: its name, unless it shares another
    /// family's scenario type (the scenario then says which family it is).
    pub scenario_tag: &'static str,
    /// Its scenario from the fields of a scenario file's `family` object (the tag taken out):
    /// [`read`] of its scenario type.
    pub read: fn(fields: serde_json::Value) -> Result<Box<dyn FamilyScenario>, serde_json::Error>,
    /// Run its checkers over a trace: a trace recorded anywhere, not only one this harness
    /// simulated (the checkers read their constants from its `run.spec` event).
    pub check: fn(trace: &Trace, schema: &McpSchema) -> Vec<Violation>,
    /// Its `hunt --coverage` tables, declared in full.
    pub coverage_tables: &'static [Table],
    /// The coverage cells a trace of this family hits.
    pub observe: fn(trace: &Trace) -> Vec<Cell>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Families are told apart by name.
impl PartialEq for Family {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Family {}

/// Read a family scenario of type `T` (a family's [`Family::read`]).
pub fn read<T>(fields: serde_json::Value) -> Result<Box<dyn FamilyScenario>, serde_json::Error>
where
    T: FamilyScenario + serde::de::DeserializeOwned + 'static,
{
    Ok(Box::new(serde_json::from_value::<T>(fields)?))
}

/// A family's switch set with the named switches on (the names validated by the token).
pub fn switches_on<B: Default>(
    bugs: &[String],
    enable: fn(&mut B, &str) -> Result<(), String>,
) -> B {
    let mut set = B::default();
    for bug in bugs {
        enable(&mut set, bug).expect("token switches are validated");
    }
    set
}
