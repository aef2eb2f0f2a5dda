//! Generator coverage: what a hunt's cases really exercised, counted per cell of each family's
//! tables (fault kind × the phase it hit, each ending the oracles distinguish), so that a blind
//! spot of the generator shows as a zero instead of hiding behind a clean hunt.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One of a family's coverage tables: the rows and columns it declares, so that cells nobody hit
/// are printed as zeros. Observed cells outside them are printed too (nothing is hidden).
#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    pub rows: &'static [&'static str],
    pub cols: &'static [&'static str],
    /// Cells the generator cannot reach by construction (printed as `-`, not counted as zeros).
    pub unreachable: &'static [(&'static str, &'static str)],
}

/// One observation in one case: a cell of a table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    pub table: &'static str,
    pub row: String,
    pub col: String,
}

impl Cell {
    pub fn new(table: &'static str, row: impl Into<String>, col: impl Into<String>) -> Self {
        Self { table, row: row.into(), col: col.into() }
    }
}

/// Counts of cells over a number of cases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    pub cases: u64,
    counts: BTreeMap<Cell, u64>,
    /// The first case (by index) that hit each cell, and its token: a cell's example to replay.
    examples: BTreeMap<Cell, (u64, String)>,
}

impl Coverage {
    /// Add one case's observations.
    pub fn add_case(&mut self, cells: Vec<Cell>) {
        self.cases += 1;
        for cell in cells {
            *self.counts.entry(cell).or_default() += 1;
        }
    }

    /// Add the observations of case `index` (token `token`), which becomes the example of each
    /// cell it hit that no earlier case hit (whatever order the cases finish in).
    pub fn add_named_case(&mut self, index: u64, token: &str, cells: Vec<Cell>) {
        for cell in &cells {
            self.note_example(cell, index, token);
        }
        self.add_case(cells);
    }

    fn note_example(&mut self, cell: &Cell, index: u64, token: &str) {
        let earlier = self.examples.get(cell).is_some_and(|(first, _)| *first <= index);
        if !earlier {
            self.examples.insert(cell.clone(), (index, token.to_string()));
        }
    }

    /// The token of the first case that hit `cell`, if a named case did.
    pub fn example(&self, cell: &Cell) -> Option<&str> {
        self.examples.get(cell).map(|(_, token)| token.as_str())
    }

    /// How often a cell was observed in all.
    pub fn count(&self, table: &str, row: &str, col: &str) -> u64 {
        self.counts
            .iter()
            .find(|(cell, _)| cell.table == table && cell.row == row && cell.col == col)
            .map_or(0, |(_, n)| *n)
    }

    /// Every cell of one table observed, with its count.
    pub fn cells<'a>(&'a self, table: &'a str) -> impl Iterator<Item = (&'a Cell, u64)> + 'a {
        self.counts.iter().filter(move |(cell, _)| cell.table == table).map(|(cell, n)| (cell, *n))
    }

    /// Declared, reachable cells that no case hit.
    pub fn zeros(&self, tables: &[Table]) -> Vec<(&'static str, &'static str, &'static str)> {
        let mut out = Vec::new();
        for table in tables {
            for row in table.rows {
                for col in table.cols {
                    if !table.unreachable.contains(&(*row, *col)) && self.count(table.name, row, col) == 0 {
                        out.push((table.name, *row, *col));
                    }
                }
            }
        }
        out
    }

    /// Every table, counts scaled to per 1 000 cases, then the zero cells by name.
    pub fn render(&self, tables: &[Table]) -> String {
        let mut out = String::new();
        let scale = 1000.0 / self.cases.max(1) as f64;
        for table in tables {
            let (rows, cols) = self.labels(table);
            let width = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(table.name.len());
            let _ = writeln!(out, "coverage: {} (per 1 000 cases, {} cases run)", table.name, self.cases);
            let mut header = format!("  {:<width$}", "");
            for col in &cols {
                let _ = write!(header, " {:>w$}", col, w = col.len().max(6));
            }
            let _ = writeln!(out, "{}", header.trim_end());
            for row in &rows {
                let mut line = format!("  {row:<width$}");
                for col in &cols {
                    let w = col.len().max(6);
                    let cell = if table.unreachable.contains(&(row.as_str(), col.as_str())) {
                        "-".to_string()
                    } else {
                        format!("{:.0}", self.count(table.name, row, col) as f64 * scale)
                    };
                    let _ = write!(line, " {cell:>w$}");
                }
                let _ = writeln!(out, "{line}");
            }
        }
        let zeros = self.zeros(tables);
        let _ = writeln!(out, "coverage: {} reachable cells at zero", zeros.len());
        for (table, row, col) in zeros {
            let _ = writeln!(out, "  zero: {table} {row} × {col}");
        }
        out
    }

    /// A table's declared rows and columns, then any observed ones it did not declare.
    fn labels(&self, table: &Table) -> (Vec<String>, Vec<String>) {
        let mut rows: Vec<String> = table.rows.iter().map(|s| s.to_string()).collect();
        let mut cols: Vec<String> = table.cols.iter().map(|s| s.to_string()).collect();
        for cell in self.counts.keys().filter(|c| c.table == table.name) {
            if !rows.contains(&cell.row) {
                rows.push(cell.row.clone());
            }
            if !cols.contains(&cell.col) {
                cols.push(cell.col.clone());
            }
        }
        (rows, cols)
    }

    /// Add another coverage's counts (a shard's, a worker's).
    pub fn merge(&mut self, other: &Coverage) {
        self.cases += other.cases;
        for (cell, n) in &other.counts {
            *self.counts.entry(cell.clone()).or_default() += n;
        }
        for (cell, (index, token)) in &other.examples {
            self.note_example(cell, *index, token);
        }
    }
}

/// The table every family starts from: which fault kinds took effect (`fault.injected`, phase
/// `start`; the heal marker is not a fault).
pub const FAULT_KIND: &str = "fault kind injected";

/// One cell per fault that took effect, in table [`FAULT_KIND`].
pub fn faults_injected(trace: &crate::trace::Trace) -> Vec<Cell> {
    use bridge_under_test::events::kind;
    trace
        .of_kind(kind::FAULT_INJECTED)
        .filter(|(_, e)| e.text("phase") == "start" && e.text("fault") != "heal")
        .map(|(_, e)| Cell::new(FAULT_KIND, e.text("fault"), "start"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: Table = Table {
        name: "fault × phase",
        rows: &["crash", "drop"],
        cols: &["before", "after"],
        unreachable: &[("drop", "before")],
    };

    #[test]
    fn zeros_are_the_declared_reachable_cells_nobody_hit() {
        let mut coverage = Coverage::default();
        coverage.add_case(vec![Cell::new(TABLE.name, "crash", "before"), Cell::new(TABLE.name, "crash", "before")]);
        coverage.add_case(vec![Cell::new(TABLE.name, "stall", "after")]);
        assert_eq!(coverage.cases, 2);
        assert_eq!(coverage.count(TABLE.name, "crash", "before"), 2);
        assert_eq!(coverage.zeros(&[TABLE]), vec![(TABLE.name, "crash", "after"), (TABLE.name, "drop", "after")]);
        let text = coverage.render(&[TABLE]);
        // 2 observations in 2 cases: 1 000 per 1 000 cases; the undeclared row is shown too.
        assert!(text.contains("1000"), "{text}");
        assert!(text.contains("stall"), "{text}");
        assert!(text.contains("zero: fault × phase drop × after"), "{text}");
        assert!(!text.contains("drop × before"), "{text}");
    }

    #[test]
    fn merge_adds_cases_and_counts() {
        let mut a = Coverage::default();
        a.add_case(vec![Cell::new(TABLE.name, "crash", "after")]);
        let mut b = Coverage::default();
        b.add_case(vec![Cell::new(TABLE.name, "crash", "after")]);
        a.merge(&b);
        assert_eq!((a.cases, a.count(TABLE.name, "crash", "after")), (2, 2));
    }

    #[test]
    fn a_cells_example_is_its_earliest_case_whatever_the_order() {
        let crash = Cell::new(TABLE.name, "crash", "after");
        let mut a = Coverage::default();
        a.add_named_case(7, "late", vec![crash.clone()]);
        a.add_named_case(3, "early", vec![crash.clone()]);
        a.add_named_case(5, "middle", vec![crash.clone()]);
        assert_eq!(a.example(&crash), Some("early"));
        let mut b = Coverage::default();
        b.add_named_case(1, "first", vec![crash.clone()]);
        a.merge(&b);
        assert_eq!(a.example(&crash), Some("first"));
        assert_eq!(a.example(&Cell::new(TABLE.name, "drop", "after")), None);
    }
}
