//! The deterministic simulation harness: a run is a pure function of (commit, scenario token).
//! Its imports run one way (ARCHITECTURE.md): the commands read the registry and drive an
//! engine; the engines know a family only through the contract in `family`; each family
//! implements it once, over its systems under test (`bridge-under-test`).

// What a family is, and which families there are: a new family is a module below and a line in
// `families::FAMILIES`.
pub mod families;
pub mod family;

// The families.
pub mod channel;
pub mod daemon;
pub mod relay;
pub mod sdk;

// The engines: the simulation (turmoil, virtual time) and live (real processes, real time).
pub mod live;
pub mod runner;

// What engines, families and commands share: the trace and its recorder, checking, coverage,
// seeds.
pub mod check;
pub mod coverage;
pub mod recorder;
pub mod schema;
pub mod seed;
pub mod swarm;
pub mod trace;
pub mod verdicts;

// The commands' side: generation, shrinking and the hunt, tokens, the benchmark, trace files
// and drawings.
pub mod bench;
pub mod hunt;
pub mod jsonl;
pub mod token;
pub mod view;
