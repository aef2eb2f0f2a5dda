//! `Scenario`: everything a run depends on. Its JSON is the long form of a replay token.

use serde::{Deserialize, Serialize};

use crate::relay::RelayScenario;

/// The families of systems under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Relay,
}

impl Family {
    pub const ALL: &'static [Family] = &[Family::Relay];

    pub fn name(self) -> &'static str {
        match self {
            Family::Relay => "relay",
        }
    }

    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL.iter().copied().find(|f| f.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
            format!("unknown family `{name}`; valid: {}", names.join(" "))
        })
    }

    /// The family's bug switch names, as MODEL.md spells them.
    pub fn switches(self) -> &'static [&'static str] {
        match self {
            Family::Relay => bridge_under_test::relay::RelayBugs::NAMES,
        }
    }
}

/// The simulator's own parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimParams {
    pub tick_ms: u64,
    /// Link latency is drawn by turmoil in `0..=latency_max_ms`.
    pub latency_max_ms: u64,
    /// Poll hosts in a seeded random order each step.
    pub random_order: bool,
    /// The run stops here at the latest.
    pub horizon_ms: u64,
}

/// One family's scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum FamilyScenario {
    Relay(RelayScenario),
}

/// Everything a run depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// The seed every sub-seed (turmoil, mocks, the bridge) is derived from.
    pub seed: u64,
    pub sim: SimParams,
    pub family: FamilyScenario,
}

impl Scenario {
    pub fn family(&self) -> Family {
        match self.family {
            FamilyScenario::Relay(_) => Family::Relay,
        }
    }

    /// Pretty JSON (the long form of a token).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("not a scenario: {e}"))
    }
}
