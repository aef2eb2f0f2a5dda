//! The deterministic simulation engine: scenarios, faults, the owned step loop, the trace
//! recorder, checkers, shrinking, tokens and replay. A run is a pure function of
//! (commit, scenario token).

pub mod bench;
pub mod check;
pub mod coverage;
pub mod channel;
pub mod daemon;
pub mod family;
pub mod hunt;
pub mod jsonl;
pub mod live;
pub mod recorder;
pub mod relay;
pub mod runner;
pub mod scenario;
pub mod schema;
pub mod sdk;
pub mod seed;
pub mod swarm;
pub mod token;
pub mod trace;
pub mod verdicts;
pub mod view;
