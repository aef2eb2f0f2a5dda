//! A bridge profile: what a bridge does by design, declared in a small JSON file, never guessed.
//! A profile declares policy (its deadline, the promises its documentation makes); it can never
//! silence a property every bridge owes its user (`oracles::UNIVERSAL`).

use serde::Deserialize;

use bridge_under_test::relay::relayer::Transport;

use super::oracles;

/// Whether `k` is a speed the live engine runs at (`--speed`, a profile's `speed`).
pub fn check_speed(k: u32) -> Result<(), String> {
    match k {
        1..=1_000 => Ok(()),
        _ => Err(format!("--speed {k}: between 1 (real time) and 1000")),
    }
}

/// The bridge's own per-call deadline.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deadline {
    /// It has none by design: a call the server never answers waits until the client leaves.
    None,
    /// It runs with the scenario's timing (our `relay-bridge`, configured per case).
    Scenario,
    /// A fixed deadline in milliseconds.
    Ms(u64),
}

/// A promise the bridge's design makes, judged by the policy oracle of that name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promise {
    /// The oracle that judges it (one of `oracles::POLICY`).
    pub oracle: String,
    /// What the design says, in a sentence.
    #[serde(default)]
    pub design: String,
    /// Where the bridge's source says so (`file:line`, upstream).
    #[serde(default)]
    pub source: String,
}

/// Something the bridge does by design that no oracle judges as a promise (its retries, whether
/// it initializes a lost session again, what it answers itself), with the upstream line it rests
/// on: documentation for the reader of a finding, never a switch on a verdict.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Design {
    /// What it is about: `retries`, `session`, `reconnect`, `answers_itself`, ...
    pub topic: String,
    /// What the bridge does, in a sentence.
    pub does: String,
    /// Where its source says so (`file:line`, upstream).
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    /// The transports it speaks (`relayer`, `sse`, `streamable_http`); the first is the default.
    #[serde(default)]
    pub transports: Vec<Transport>,
    pub deadline: Deadline,
    /// Where the deadline comes from in its source.
    #[serde(default)]
    pub deadline_source: String,
    /// Its own deadline for the client's `initialize`, in milliseconds from when it sends it to
    /// the server, if it has one apart from `deadline` (mcp-remote answers an unanswered
    /// `initialize` with an error after 30 s): a case lasts long enough for it to run out.
    #[serde(default)]
    pub initialize_deadline_ms: Option<u64>,
    /// Where that deadline comes from in its source.
    #[serde(default)]
    pub initialize_deadline_source: String,
    /// How long after stdin closes it may take to exit.
    #[serde(default = "exit_within_ms")]
    pub exit_within_ms: u64,
    /// Scheduling slack for timing verdicts (a real process's timers and start-up).
    #[serde(default = "slack_ms")]
    pub slack_ms: u64,
    /// Whether the bridge sends the bearer token it is given (`MCP_BEARER_TOKEN`, or as its
    /// command line puts it): the mock server then requires it.
    #[serde(default)]
    pub bearer: bool,
    /// Environment the command needs (besides `MCP_SERVER_URL`).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub promises: Vec<Promise>,
    /// What it does by design besides its promises, each with its source line (not judged).
    #[serde(default)]
    pub design: Vec<Design>,
    /// The speed (libfaketime) at which its verdicts were measured to match real time: the
    /// default of `--speed` for this bridge. 1 (real time) when absent.
    #[serde(default = "real_time")]
    pub speed: u32,
}

fn exit_within_ms() -> u64 {
    5_000
}

fn slack_ms() -> u64 {
    500
}

fn real_time() -> u32 {
    1
}

impl Profile {
    /// The profile of a bridge nobody described: no deadline, no promises; only what every
    /// bridge owes its user is judged.
    pub fn unknown() -> Self {
        Self {
            name: "unprofiled".to_string(),
            transports: Vec::new(),
            deadline: Deadline::None,
            deadline_source: String::new(),
            initialize_deadline_ms: None,
            initialize_deadline_source: String::new(),
            exit_within_ms: exit_within_ms(),
            slack_ms: slack_ms(),
            bearer: false,
            env: Vec::new(),
            promises: Vec::new(),
            design: Vec::new(),
            speed: real_time(),
        }
    }

    /// Read and validate a profile file.
    pub fn load(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read profile {path}: {e}"))?;
        let profile: Profile = serde_json::from_str(&text).map_err(|e| format!("profile {path}: {e}"))?;
        profile.validate().map_err(|e| format!("profile {path}: {e}"))?;
        Ok(profile)
    }

    fn validate(&self) -> Result<(), String> {
        check_speed(self.speed).map_err(|e| format!("speed: {e}"))?;
        for promise in &self.promises {
            if oracles::UNIVERSAL.contains(&promise.oracle.as_str()) {
                return Err(format!(
                    "`{}` judges what every bridge owes its user; a profile cannot declare it",
                    promise.oracle
                ));
            }
            if !oracles::POLICY.contains(&promise.oracle.as_str()) {
                return Err(format!("`{}` is not a policy oracle; they are: {}", promise.oracle, oracles::POLICY.join(", ")));
            }
        }
        Ok(())
    }

    /// Whether the profile promises what `oracle` judges.
    pub fn promises(&self, oracle: &str) -> bool {
        self.promises.iter().any(|p| p.oracle == oracle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Profile, String> {
        let profile: Profile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        profile.validate().map(|()| profile)
    }

    #[test]
    fn a_profile_declares_policy_but_never_a_universal_property() {
        let ok = parse(r#"{"name": "b", "deadline": {"ms": 60000}, "promises": [{"oracle": "post_retries", "source": "x.ts:1"}]}"#);
        assert!(ok.is_ok_and(|p| p.promises("post_retries") && p.deadline == Deadline::Ms(60_000)));
        let err = parse(r#"{"name": "b", "deadline": "none", "promises": [{"oracle": "one_reply_per_id"}]}"#).unwrap_err();
        assert!(err.contains("every bridge owes its user"), "{err}");
        let err = parse(r#"{"name": "b", "deadline": "none", "promises": [{"oracle": "made_up"}]}"#).unwrap_err();
        assert!(err.contains("not a policy oracle"), "{err}");
        assert!(parse(r#"{"name": "b", "deadline": "none", "typo": 1}"#).is_err());
    }

    #[test]
    fn every_shipped_profile_loads() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
        let mut loaded = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let profile = Profile::load(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
                assert!(!profile.transports.is_empty(), "{}: no transports", path.display());
                loaded += 1;
            }
        }
        assert!(loaded >= 4, "{loaded} profiles in {}", dir.display());
    }
}
