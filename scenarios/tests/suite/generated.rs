//! Generated runs with every switch off: the correct components never violate an invariant.

use harness::scenario::Family;

#[test]
fn all_switches_off_find_nothing() {
    crate::assert_clean(Family::Relay, crate::cases(96), 0xC1EA_0001);
}
