//! A trace as a sequence diagram in one self-contained HTML file: a lane per host, virtual time
//! going down with idle spans compressed, an arrow per correlated message, frames folded into
//! runs, fault windows shaded, the heal point and each violation marked.
//!
//! One concept per file: [`lanes`] (which columns), [`correlate`] (which event sent and which
//! received each message), [`fold`] (runs of frames), [`timeline`] (rows and compressed idle
//! spans), [`faults`] (fault windows), [`layout`] (all of it as data) and [`render`] (the HTML).

pub mod correlate;
pub mod faults;
pub mod fold;
pub mod lanes;
pub mod layout;
pub mod render;
pub mod timeline;

#[cfg(test)]
mod tests;

pub use layout::Layout;
pub use render::{page, Header};
