//! The bridge's pending maps as plain data, apart from any I/O: permission requests and
//! approvals, each entry with the expiry captured when it was tracked.

use std::collections::BTreeMap;

/// Which map an entry lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Map {
    Permissions,
    Approvals,
}

impl Map {
    /// The name in trace events.
    pub fn name(self) -> &'static str {
        match self {
            Map::Permissions => "permission",
            Map::Approvals => "approval",
        }
    }
}

/// One pending entry. Times are the bridge's wall clock in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub tracked_at_ms: u64,
    pub expires_at_ms: u64,
    /// The gateway's `createdAtMs`, kept only for the `reanchor_fallback_ttl` regression.
    pub created_at_ms: Option<i64>,
    /// Whether the gateway gave an `expiresAtMs` (the regression re-anchors the others).
    pub has_expiry: bool,
    /// Insertion order, for oldest-first eviction.
    pub seq: u64,
}

impl Entry {
    /// Expired from the instant its expiry is reached.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at_ms
    }
}

/// An approval's expiry: `expiresAtMs` clamped to at most `tracked_at + cap_ms`, or
/// `tracked_at + default_ttl_ms` when the gateway gave none. A pure function of data captured at
/// tracking time.
pub fn approval_expiry(
    tracked_at_ms: u64,
    expires_at: Option<i64>,
    cap_ms: u64,
    default_ttl_ms: u64,
) -> u64 {
    let cap = tracked_at_ms.saturating_add(cap_ms);
    match expires_at {
        Some(at) => u64::try_from(at.max(0)).unwrap_or(0).min(cap),
        None => tracked_at_ms.saturating_add(default_ttl_ms),
    }
}

/// The `reanchor_fallback_ttl` regression's expiry: `(createdAtMs or now) + default_ttl_ms`,
/// recomputed every time it is asked.
pub fn reanchored_expiry(now_ms: u64, created_at: Option<i64>, default_ttl_ms: u64) -> u64 {
    let anchor = created_at.map_or(now_ms, |at| u64::try_from(at.max(0)).unwrap_or(0));
    anchor.saturating_add(default_ttl_ms)
}

/// Both maps.
#[derive(Debug, Default)]
pub struct Pending {
    permissions: BTreeMap<String, Entry>,
    approvals: BTreeMap<String, Entry>,
    next_seq: u64,
}

impl Pending {
    pub fn map(&self, map: Map) -> &BTreeMap<String, Entry> {
        match map {
            Map::Permissions => &self.permissions,
            Map::Approvals => &self.approvals,
        }
    }

    pub fn map_mut(&mut self, map: Map) -> &mut BTreeMap<String, Entry> {
        match map {
            Map::Permissions => &mut self.permissions,
            Map::Approvals => &mut self.approvals,
        }
    }

    /// Track `id` unless it is already tracked (a repeat keeps the first entry). Returns the
    /// entry now in the map and whether it is new.
    pub fn track(&mut self, map: Map, id: &str, mut entry: Entry) -> (Entry, bool) {
        if let Some(known) = self.map(map).get(id) {
            return (known.clone(), false);
        }
        self.next_seq += 1;
        entry.seq = self.next_seq;
        self.map_mut(map).insert(id.to_string(), entry.clone());
        (entry, true)
    }

    pub fn remove(&mut self, map: Map, id: &str) -> Option<Entry> {
        self.map_mut(map).remove(id)
    }

    /// The id of the oldest entry of `map`, if any.
    pub fn oldest(&self, map: Map) -> Option<String> {
        self.map(map)
            .iter()
            .min_by_key(|(_, entry)| entry.seq)
            .map(|(id, _)| id.clone())
    }

    /// `(permissions, approvals)`.
    pub fn sizes(&self) -> (usize, usize) {
        (self.permissions.len(), self.approvals.len())
    }

    /// Whether both maps are empty (the unit tests' check; the bridge reads `sizes`).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.permissions.is_empty() && self.approvals.is_empty()
    }

    /// Every expired entry, permissions first, each map in id order.
    pub fn expired(&self, now_ms: u64) -> Vec<(Map, String)> {
        [Map::Permissions, Map::Approvals]
            .into_iter()
            .flat_map(|map| {
                self.map(map)
                    .iter()
                    .filter(|(_, entry)| entry.expired(now_ms))
                    .map(move |(id, _)| (map, id.clone()))
            })
            .collect()
    }

    /// The ids of `map` a read returns: unexpired ones when `filter` is set.
    pub fn ids(&self, map: Map, now_ms: u64, filter: bool) -> Vec<String> {
        let entries = self.map(map).iter();
        entries
            .filter(|(_, e)| !filter || !e.expired(now_ms))
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn clear(&mut self) {
        self.permissions.clear();
        self.approvals.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tracked_at_ms: u64, expires_at_ms: u64) -> Entry {
        Entry {
            tracked_at_ms,
            expires_at_ms,
            created_at_ms: None,
            has_expiry: false,
            seq: 0,
        }
    }

    #[test]
    fn approval_expiry_is_clamped_and_defaults_to_thirty_minutes() {
        let (cap, default) = (3_600_000, 1_800_000);
        assert_eq!(approval_expiry(1_000, None, cap, default), 1_801_000);
        assert_eq!(approval_expiry(1_000, Some(601_000), cap, default), 601_000);
        assert_eq!(
            approval_expiry(1_000, Some(i64::MAX), cap, default),
            3_601_000
        );
        assert_eq!(
            approval_expiry(1_000, Some(-5), cap, default),
            0,
            "absurd past: expired"
        );
        assert_eq!(reanchored_expiry(9_000, None, default), 1_809_000);
        assert_eq!(reanchored_expiry(9_000, Some(2_000), default), 1_802_000);
    }

    #[test]
    fn repeats_keep_the_first_entry_and_eviction_takes_the_oldest() {
        let mut pending = Pending::default();
        assert!(pending.track(Map::Approvals, "b", entry(10, 100)).1);
        assert!(pending.track(Map::Approvals, "a", entry(20, 200)).1);
        let (kept, new) = pending.track(Map::Approvals, "b", entry(30, 300));
        assert!(!new);
        assert_eq!((kept.tracked_at_ms, kept.expires_at_ms), (10, 100));
        assert_eq!(pending.oldest(Map::Approvals).as_deref(), Some("b"));
        assert_eq!(pending.sizes(), (0, 2));
        assert_eq!(pending.ids(Map::Approvals, 150, true), ["a"]);
        assert_eq!(pending.ids(Map::Approvals, 150, false), ["a", "b"]);
        assert_eq!(
            pending.expired(200),
            [(Map::Approvals, "a".into()), (Map::Approvals, "b".into())]
        );
        pending.clear();
        assert!(pending.is_empty());
    }
}
