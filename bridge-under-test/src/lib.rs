//! The systems under test and their mock peers. Knows nothing of the harness: components reach
//! the network, the clock and randomness through [`seam`] and report what they do as `tracing`
//! events whose vocabulary is [`events`].

pub mod bugs;
pub mod channel;
pub mod daemon;
pub mod events;
pub mod net;
pub mod relay;
pub mod rng;
pub mod sdk;
pub mod seam;
pub mod stdio;
