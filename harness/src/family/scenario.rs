//! `Scenario`: everything a run depends on: the seed, the simulator's parameters and one family's
//! scenario. Its JSON is the long form of a replay token:
//! `{"seed": …, "sim": {…}, "family": {"family": "<tag>", <the family scenario's fields>}}`.

use std::any::Any;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{Driver, Family};

/// The simulator's own parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimParams {
    pub tick_ms: u64,
    /// Link latency is drawn by turmoil in `0..=latency_max_ms`.
    pub latency_max_ms: u64,
    /// Poll hosts in a seeded random order each step.
    pub random_order: bool,
    /// The run stops here at the latest.
    pub horizon_ms: u64,
}

/// Everything a run depends on.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed every sub-seed (turmoil, mocks, the bridge) is derived from.
    pub seed: u64,
    pub sim: SimParams,
    pub family: Box<dyn FamilyScenario>,
}

/// One family's part of a scenario (`RelayScenario`, `ChannelScenario`, ...): what the engine
/// and the CLI do with a case of any family.
pub trait FamilyScenario: AnyScenario + fmt::Debug + Send {
    /// The family this scenario is a case of.
    fn family(&self) -> &'static Family;

    /// Register the family's hosts in `sim`, seeded from `seed`; the driver applies its faults.
    fn setup(&self, seed: u64, sim: &mut turmoil::Sim<'_>) -> Box<dyn Driver>;

    /// A one-line description of the scenario's size.
    fn summary(&self) -> String;

    /// A size for comparing shrunk scenarios: operations plus faults.
    fn size(&self) -> usize;

    /// Turn every bug switch off (to check that a failure is the bug's).
    fn clear_bugs(&mut self);

    /// Turn on the named switches; `Err` for a name the family does not have.
    fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String>;
}

/// A family scenario as plain data: copied, compared, written out and looked into. Every
/// family scenario type that is `Clone`, `PartialEq` and `Serialize` has it.
pub trait AnyScenario {
    fn clone_box(&self) -> Box<dyn FamilyScenario>;
    fn same(&self, other: &dyn FamilyScenario) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// The scenario file of `seed`, `sim` and this scenario, pretty-printed.
    fn file_json(&self, seed: u64, sim: &SimParams) -> String;
}

impl<T: FamilyScenario + Clone + PartialEq + Serialize + 'static> AnyScenario for T {
    fn clone_box(&self) -> Box<dyn FamilyScenario> {
        Box::new(self.clone())
    }

    fn same(&self, other: &dyn FamilyScenario) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn file_json(&self, seed: u64, sim: &SimParams) -> String {
        let family = TaggedFields {
            family: self.family().scenario_tag,
            fields: self,
        };
        serde_json::to_string_pretty(&File { seed, sim, family }).unwrap_or_default()
    }
}

/// A scenario file as written: the family scenario's fields after its tag.
#[derive(Serialize)]
struct File<'a, T> {
    seed: u64,
    sim: &'a SimParams,
    family: TaggedFields<'a, T>,
}

#[derive(Serialize)]
struct TaggedFields<'a, T> {
    family: &'static str,
    #[serde(flatten)]
    fields: &'a T,
}

impl Clone for Box<dyn FamilyScenario> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl dyn FamilyScenario {
    /// The family's own scenario type, if it is `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }

    pub fn downcast_mut<T: 'static>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }
}

impl PartialEq for Scenario {
    fn eq(&self, other: &Self) -> bool {
        (self.seed, self.sim) == (other.seed, other.sim) && self.family.same(other.family.as_ref())
    }
}

impl Eq for Scenario {}

impl Scenario {
    /// The family this is a case of.
    pub fn family(&self) -> &'static Family {
        self.family.family()
    }

    /// Pretty JSON (the long form of a token).
    pub fn to_json(&self) -> String {
        self.family.file_json(self.seed, &self.sim)
    }

    /// Read a scenario file; `families` are the families whose scenarios it may hold.
    pub fn from_json(text: &str, families: &[&'static Family]) -> Result<Self, String> {
        let mut reader = serde_json::Deserializer::from_str(text);
        let scenario = FileSeed(families)
            .deserialize(&mut reader)
            .and_then(|s| reader.end().map(|()| s));
        scenario.map_err(|e| format!("not a scenario: {e}"))
    }
}

const FIELDS: &[&str] = &["seed", "sim", "family"];

/// Reads a scenario file as serde's derive would read it (same errors, at the same places): the
/// fields of [`Scenario`], none unknown; the family's own scenario read by the family its tag
/// names.
struct FileSeed<'a>(&'a [&'static Family]);

impl<'de> DeserializeSeed<'de> for FileSeed<'_> {
    type Value = Scenario;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Scenario, D::Error> {
        deserializer.deserialize_struct("Scenario", FIELDS, self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_> {
    type Value = Scenario;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct Scenario")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scenario, A::Error> {
        let (mut seed, mut sim, mut family) = (None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "seed" => {
                    fresh(&seed, "seed")?;
                    seed = Some(map.next_value()?);
                }
                "sim" => {
                    fresh(&sim, "sim")?;
                    sim = Some(map.next_value()?);
                }
                "family" => {
                    fresh(&family, "family")?;
                    let (named, fields) = map.next_value_seed(TagSeed(self.0))?;
                    family = Some((named.read)(fields).map_err(de::Error::custom)?);
                }
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        Ok(Scenario {
            seed: seed.ok_or_else(|| de::Error::missing_field("seed"))?,
            sim: sim.ok_or_else(|| de::Error::missing_field("sim"))?,
            family: family.ok_or_else(|| de::Error::missing_field("family"))?,
        })
    }
}

/// A field seen a second time is an error, raised at its key (as serde's derive does).
fn fresh<T, E: de::Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(name)),
        None => Ok(()),
    }
}

/// Reads the `family` object: the family its tag names, and the other fields.
struct TagSeed<'a>(&'a [&'static Family]);

type Named = (&'static Family, serde_json::Value);

impl<'de> DeserializeSeed<'de> for TagSeed<'_> {
    type Value = Named;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Named, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TagSeed<'_> {
    type Value = Named;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("internally tagged enum FamilyScenario")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Named, A::Error> {
        let mut family = None;
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key != "family" {
                fields.insert(key, map.next_value()?);
                continue;
            }
            fresh(&family, "family")?;
            let tag: String = map.next_value()?;
            let Some(named) = self.0.iter().find(|f| f.scenario_tag == tag) else {
                let mut tags: Vec<String> = self
                    .0
                    .iter()
                    .map(|f| format!("`{}`", f.scenario_tag))
                    .collect();
                tags.dedup();
                let tags = tags.join(", ");
                return Err(de::Error::custom(format_args!(
                    "unknown variant `{tag}`, expected one of {tags}"
                )));
            };
            family = Some(*named);
        }
        let family = family.ok_or_else(|| de::Error::missing_field("family"))?;
        Ok((family, serde_json::Value::Object(fields)))
    }
}
