//! Swarm testing, shared by every family's strategy: each case first draws which fault kinds are
//! on (a profile), then a plan of faults drawn only from those kinds. Different cases stress
//! different combinations, rather than every case getting a thin mix of everything.

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

/// A subset of `kinds`, each on with probability one half.
pub fn profile(kinds: &'static [&'static str]) -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(any::<bool>(), kinds.len()).prop_map(move |on| {
        kinds.iter().zip(on).filter(|(_, on)| *on).map(|(kind, _)| *kind).collect()
    })
}

/// A plan of `sizes` faults, each drawn from one of `choices` (the profile's kinds); empty when
/// the profile turned every kind off. Shrinking drops faults first.
pub fn plan<T: std::fmt::Debug + Clone + 'static>(
    choices: Vec<BoxedStrategy<T>>,
    sizes: std::ops::RangeInclusive<usize>,
) -> BoxedStrategy<Vec<T>> {
    weighted_plan(choices.into_iter().map(|choice| (1, choice)).collect(), sizes)
}

/// [`plan`] with a weight per choice: a kind that sets up the race a family is about is drawn
/// more often than the kinds that only perturb it.
pub fn weighted_plan<T: std::fmt::Debug + Clone + 'static>(
    choices: Vec<(u32, BoxedStrategy<T>)>,
    sizes: std::ops::RangeInclusive<usize>,
) -> BoxedStrategy<Vec<T>> {
    if choices.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        prop::collection::vec(Union::new_weighted(choices), sizes).boxed()
    }
}
