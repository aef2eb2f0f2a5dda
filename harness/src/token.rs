//! Replay tokens: one shell-safe word that alone reproduces a run on a fresh clone:
//! `v1.<family>.<switch>+<switch>|none.<seed as 16 hex digits>`.

use crate::families;
use crate::family::Family;

/// What a token encodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub family: &'static Family,
    /// Bug switch names, validated against the family.
    pub bugs: Vec<String>,
    pub seed: u64,
}

const VERSION: &str = "v1";

/// What a live case's token starts with: the same scenario words, drawn by the live generator.
pub const LIVE_PREFIX: &str = "live.";

impl Token {
    pub fn new(family: &'static Family, bugs: &[String], seed: u64) -> Result<Self, String> {
        for bug in bugs {
            if !family.switches.contains(&bug.as_str()) {
                return Err(format!(
                    "unknown bug switch `{bug}` for family {}; valid: {}",
                    family.name,
                    family.switches.join(" ")
                ));
            }
        }
        let mut bugs = bugs.to_vec();
        bugs.sort_by_key(|b| family.switches.iter().position(|s| s == b));
        bugs.dedup();
        Ok(Self { family, bugs, seed })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().starts_with(LIVE_PREFIX) {
            return Err(format!(
                "`{text}` is a live token: rerun it against its bridge with `harness live --bridge CMD --replay {text}`"
            ));
        }
        let parts: Vec<&str> = text.trim().split('.').collect();
        let [version, family, bugs, seed] = parts[..] else {
            return Err(format!("malformed token `{text}`: expected v1.<family>.<bugs>.<seed>"));
        };
        if version != VERSION {
            return Err(format!("malformed token `{text}`: unknown version `{version}` (this build reads {VERSION})"));
        }
        let family = families::named(family).map_err(|e| format!("malformed token `{text}`: {e}"))?;
        let bugs: Vec<String> =
            if bugs == "none" { Vec::new() } else { bugs.split('+').map(str::to_string).collect() };
        if seed.len() != 16 {
            return Err(format!("malformed token `{text}`: the seed must be 16 hex digits"));
        }
        let seed = u64::from_str_radix(seed, 16)
            .map_err(|_| format!("malformed token `{text}`: the seed must be 16 hex digits"))?;
        Self::new(family, &bugs, seed).map_err(|e| format!("malformed token `{text}`: {e}"))
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bugs = if self.bugs.is_empty() { "none".to_string() } else { self.bugs.join("+") };
        write!(f, "{VERSION}.{}.{bugs}.{:016x}", self.family.name, self.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::RELAY;

    #[test]
    fn tokens_round_trip() {
        let bugs = vec!["no_idempotency_key".to_string(), "no_call_deadline".to_string()];
        let token = Token::new(&RELAY, &bugs, 0xdead_beef).unwrap();
        let text = token.to_string();
        assert_eq!(text, "v1.relay.no_call_deadline+no_idempotency_key.00000000deadbeef");
        assert_eq!(Token::parse(&text).unwrap(), token);
        let clean = Token::new(&RELAY, &[], 1).unwrap().to_string();
        assert_eq!(clean, "v1.relay.none.0000000000000001");
        assert_eq!(Token::parse(&clean).unwrap().bugs, Vec::<String>::new());
    }

    #[test]
    fn malformed_tokens_say_why() {
        for (text, why) in [
            ("", "expected v1"),
            ("v2.relay.none.0000000000000001", "unknown version"),
            ("v1.nope.none.0000000000000001", "unknown family"),
            ("v1.relay.bogus.0000000000000001", "unknown bug switch"),
            ("v1.relay.none.xyz", "16 hex digits"),
        ] {
            let error = Token::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
