//! The bridge's bounded event queue: what `waitForEvent` hands the agent. Beyond its limit the
//! oldest event is dropped, so a silent agent never grows the bridge without bound.

use std::collections::VecDeque;

use serde_json::Value;

#[derive(Debug)]
pub struct EventQueue {
    events: VecDeque<Value>,
    limit: usize,
}

impl EventQueue {
    pub fn new(limit: usize) -> Self {
        Self {
            events: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Append an event; returns whether the oldest was dropped to make room.
    pub fn push(&mut self, event: Value) -> bool {
        let dropped = self.events.len() >= self.limit;
        if dropped {
            self.events.pop_front();
        }
        self.events.push_back(event);
        dropped
    }

    /// Take up to `limit` of the oldest events.
    pub fn take(&mut self, limit: usize) -> Vec<Value> {
        let count = limit.min(self.events.len());
        self.events.drain(..count).collect()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn clear(&mut self) {
        self.events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_oldest_is_dropped_at_the_limit() {
        let mut queue = EventQueue::new(2);
        assert!(!queue.push(json!(1)));
        assert!(!queue.push(json!(2)));
        assert!(queue.push(json!(3)));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.take(5), [json!(2), json!(3)]);
        assert!(queue.is_empty());
    }
}
