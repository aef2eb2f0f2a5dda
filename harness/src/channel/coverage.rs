//! What the channel generator's cases exercised (`hunt --coverage`): the tables and the cells one
//! trace hits.

use crate::coverage::{faults_injected, Cell, Table, FAULT_KIND};
use crate::trace::Trace;

use super::faults::KINDS;

/// The channel family's coverage tables.
pub const TABLES: &[Table] = &[Table { name: FAULT_KIND, rows: KINDS, cols: &["start"], unreachable: &[] }];

/// The cells one run's trace hits.
pub fn observe(trace: &Trace) -> Vec<Cell> {
    faults_injected(trace)
}
