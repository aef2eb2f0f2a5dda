//! Generated runs with every switch off: the correct components never violate an invariant.

#[test]
fn all_switches_off_find_nothing() {
    crate::assert_clean(&harness::relay::RELAY, crate::cases(96), 0xC1EA_0001);
}
