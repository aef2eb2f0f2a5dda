//! One live case: the mock server on loopback, the bridge as a real process, the scripted MCP
//! client on its stdio, the fault plan applied by the wall clock, and every observation recorded
//! in the trace vocabulary of the simulation. Bounded by the case's horizon plus the exit bound;
//! the process group, the server's port and its threads are released however the bridge behaves.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client;
use bridge_under_test::relay::relayer::{Durable, Transport};
use bridge_under_test::relay::{RelayerConfig, RelayerKnobs};
use bridge_under_test::stdio;
use serde_json::{json, Value};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Notify;

use super::process::{BridgeProcess, Exit};
use crate::relay::profile::{Deadline, Profile};
use super::proxy::LinkProxy;
use super::server::{MockServer, ServerParts};
use super::speed::Speed;
use crate::family;
use crate::recorder::{announce, LiveClock, Recorder};
use crate::relay::faults::{self, NetworkAction, RelayFault, Targets};
use crate::relay::{RelayScenario, Spec};
use crate::seed::derive;
use crate::trace::Trace;

/// How long the client may take to finish once the process is gone.
const CLIENT_GRACE: Duration = Duration::from_secs(2);

/// Wall time the case waits for an exit beyond the bridge's exit bound (its CPU at any speed).
const EXIT_WALL_GRACE_MS: u64 = 1_000;
/// By when a bridge has usually sent the client's `initialize` on (its start-up, a probe of the
/// server): the case waits this long plus its `initialize` deadline before it ends.
const INITIALIZE_SENT_BY_MS: u64 = 3_000;

/// What a live case needs besides its scenario.
#[derive(Debug, Clone)]
pub struct Bridge {
    /// The command, run with `sh -c`; `{url}` is replaced by the server's URL.
    pub command: String,
    pub profile: Profile,
    /// The transport the mock server speaks.
    pub transport: Transport,
    /// How much faster than the wall clock the bridge's clock runs (libfaketime).
    pub speed: Speed,
}

/// Why a case could not be run at all (bad input, not a finding).
#[derive(Debug)]
pub struct NotRun(pub String);

/// A case run: its trace, and what the bridge wrote on stderr.
pub struct Ran {
    pub trace: Trace,
    pub stderr: Vec<u8>,
    pub wall_ms: u64,
}

/// The per-call deadline the timing verdicts hold the bridge to: its profile's.
fn call_timeout_ms(scenario: &RelayScenario, profile: &Profile, horizon_ms: u64) -> u64 {
    match profile.deadline {
        Deadline::Scenario => Spec::new(&scenario.timing, 1, 0).call_timeout_ms,
        Deadline::Ms(ms) => ms,
        // No deadline by design: nothing is late before the client leaves.
        Deadline::None => horizon_ms,
    }
}

/// Run one case of `scenario` (seeded by `seed`) against `bridge`. `horizon_ms` and every time in
/// the trace are the bridge's time; `wall_ms` is the wall clock's.
pub fn run(scenario: &RelayScenario, seed: u64, horizon_ms: u64, bridge: &Bridge) -> Result<Ran, NotRun> {
    let clock = LiveClock::start(bridge.speed.factor());
    let recorder = Recorder::live(clock);
    let stderr = tracing::subscriber::with_default(recorder.subscriber(), || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| NotRun(format!("no runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, drive(scenario, seed, horizon_ms, bridge, &recorder, clock))
    })?;
    Ok(Ran { trace: Trace { events: recorder.take() }, stderr, wall_ms: clock.wall_ms() })
}

async fn drive(
    scenario: &RelayScenario,
    seed: u64,
    horizon_ms: u64,
    bridge: &Bridge,
    recorder: &Recorder,
    clock: LiveClock,
) -> Result<Vec<u8>, NotRun> {
    announce(host::SIM);
    let speed = bridge.speed;
    let call_timeout_ms = call_timeout_ms(scenario, &bridge.profile, horizon_ms);
    emit!(
        kind::RUN_SPEC,
        family = "relay",
        engine = "live",
        bridge = %bridge.profile.name,
        transport = %bridge.transport,
        call_timeout_ms,
        sweep_period_ms = (call_timeout_ms / 3).clamp(500, 5_000),
        slack_ms = bridge.profile.slack_ms * speed.factor(),
        horizon_ms,
        speed = speed.factor(),
        sse_idle_ms = scenario.timing.sse_idle_ms,
        bugs = "",
        profile = %scenario.profile.join("+"),
        promises = %crate::relay::oracles::promises_field(&bridge.profile),
        exit_within_ms = bridge.profile.exit_within_ms,
        initialize_deadline_ms = bridge.profile.initialize_deadline_ms.unwrap_or(0)
    );
    // The harness's side runs by the wall clock: the scenario with every duration divided by
    // the speed. The bridge gets its timing in its own time.
    let fast = speed.harness_side(scenario);
    // A held link needs a proxy between bridge and server; only a case that holds one has it.
    let proxy_listener = match scenario.faults.iter().any(|f| matches!(f, RelayFault::LinkHold { .. })) {
        true => Some(LinkProxy::bind().await.map_err(|e| NotRun(format!("the link proxy did not start: {e}")))?),
        false => None,
    };
    let public_port = proxy_listener.as_ref().map(|(_, port)| *port);
    let knobs = RelayerKnobs::shared();
    let parts = ServerParts {
        config: relayer_config(&fast, seed),
        knobs: knobs.clone(),
        durable: Arc::new(Mutex::new(Durable::default())),
        transport: bridge.transport,
        auth: bridge.profile.bearer,
        public_port,
    };
    let server = MockServer::start(parts, recorder.clone()).map_err(|e| NotRun(format!("the mock server did not start: {e}")))?;
    let proxy = proxy_listener.map(|(listener, _)| LinkProxy::forward(listener, server.port));
    let url = server.url(public_port);
    let env = bridge_env(scenario, seed, &bridge.profile);
    let wrapper = match speed {
        Speed::REAL => None,
        _ => Some((super::speed::faketime().map_err(NotRun)?, speed.faketime_spec())),
    };
    let (mut process, stdin, stdout) = BridgeProcess::start(&bridge.command, &url, &env, wrapper)
        .map_err(|e| NotRun(format!("cannot start `{}`: {e}", bridge.command)))?;
    let fields = vec![
        ("command".to_string(), Value::from(bridge.command.as_str())),
        ("pid".to_string(), Value::from(process.pid)),
        ("transport".to_string(), Value::from(bridge.transport.name())),
        ("url".to_string(), Value::from(url.as_str())),
    ];
    recorder.record(host::BRIDGE, kind::PROCESS_START, fields);
    let close_stdin = Arc::new(Notify::new());
    let (client, stdin_closed) = start_client(&fast, seed, recorder, close_stdin.clone(), stdin, stdout);
    let targets = Targets { knobs: &knobs, close_stdin: &close_stdin, script: &fast.script };
    // A bridge with a deadline of its own for the `initialize` is given the time to answer it
    // with an error: the deadline, from a start-up of a few seconds, and the slack.
    let lasts_ms = bridge.profile.initialize_deadline_ms.map_or(horizon_ms, |ms| horizon_ms.max(ms + INITIALIZE_SENT_BY_MS + bridge.profile.slack_ms));
    let end = |closed_wall_ms| case_end_wall_ms(lasts_ms, bridge.profile.exit_within_ms, speed, closed_wall_ms);
    let deadline = tokio::time::sleep_until(clock.at_wall(end(None)).into());
    // The process may exit before the fault plan is over (stdin closed early, or a crash).
    let exited = {
        let faults = apply_faults(&fast, &targets, &server, proxy.as_ref(), clock);
        tokio::pin!(faults, deadline, stdin_closed);
        let (mut faults_done, mut closed) = (false, false);
        loop {
            tokio::select! {
                () = &mut faults, if !faults_done => faults_done = true,
                _ = &mut stdin_closed, if !closed => {
                    // The client closed stdin (late, if the bridge was slow to answer what its
                    // script waits for): the bridge gets its whole exit bound from here.
                    closed = true;
                    deadline.as_mut().reset(clock.at_wall(end(Some(clock.wall_ms()))).into());
                }
                exit = process.wait() => break Some(exit),
                () = &mut deadline => break None,
            }
        }
    };
    let (exit, by) = match exited {
        Some(exit) => (exit, "self"),
        None => (Exit { code: None, signal: None }, "harness"),
    };
    let (reaped, stderr) = process.reap().await;
    let exit = if by == "harness" { reaped } else { exit };
    record_exit(recorder, &exit, by);
    if by == "self" && matches!(exit.code, Some(126 | 127)) {
        let why = String::from_utf8_lossy(&stderr).lines().next().unwrap_or("").to_string();
        return Err(NotRun(format!("`{}` did not start (exit {}): {why}", bridge.command, exit.code.unwrap_or(0))));
    }
    // The client's reader ends with the process's stdout, so it is done soon after the reap.
    let _ = tokio::time::timeout(CLIENT_GRACE, client).await;
    drop(server);
    Ok(stderr)
}

/// When the case ends at the latest, in wall milliseconds since it began: the horizon plus the
/// bridge's exit bound, or, once the client has closed stdin (at `stdin_closed_wall_ms`), that
/// moment plus the exit bound if it is later. The exit bound is the bridge's time; a second of
/// wall time on top for its CPU, which faketime does not speed up.
fn case_end_wall_ms(horizon_ms: u64, exit_within_ms: u64, speed: Speed, stdin_closed_wall_ms: Option<u64>) -> u64 {
    let wall = |ms: u64| ms.div_ceil(speed.factor());
    let by_horizon = wall(horizon_ms) + wall(exit_within_ms) + EXIT_WALL_GRACE_MS;
    let by_close = stdin_closed_wall_ms.map_or(0, |closed| closed + wall(exit_within_ms) + EXIT_WALL_GRACE_MS);
    by_horizon.max(by_close)
}

fn record_exit(recorder: &Recorder, exit: &Exit, by: &str) {
    let text = |n: Option<i32>| n.map_or(String::new(), |n| n.to_string());
    let fields = vec![
        ("code".to_string(), Value::from(text(exit.code))),
        ("signal".to_string(), Value::from(text(exit.signal))),
        ("by".to_string(), Value::from(by)),
    ];
    recorder.record(host::BRIDGE, kind::PROCESS_EXIT, fields);
}

/// The relayer as the scenario sets it up in the simulation, at a real address.
fn relayer_config(scenario: &RelayScenario, seed: u64) -> RelayerConfig {
    let timing = &scenario.timing;
    RelayerConfig {
        first_keepalive_ms: timing.first_keepalive_ms,
        keepalive_ms: timing.keepalive_ms,
        analyze_deadline_ms: timing.slowest_tool_ms,
        remember_deadline_ms: timing.remember_deadline_ms,
        seed: derive(seed, "relayer"),
        // Filled in when the port is known; only endpoint events in the absolute style use it.
        authority: "127.0.0.1".to_string(),
        announces: true,
        ..RelayerConfig::default()
    }
}

/// The environment of the bridge process: its profile's, the bearer token, and for our own
/// `relay-bridge` the scenario's timing.
fn bridge_env(scenario: &RelayScenario, seed: u64, profile: &Profile) -> Vec<(String, String)> {
    let timing = &scenario.timing;
    let config = json!({
        "sse_idle_ms": timing.sse_idle_ms,
        "slowest_tool_ms": timing.slowest_tool_ms,
        "deadline_margin_ms": timing.deadline_margin_ms,
        "call_timeout_ms": timing.call_timeout_ms,
        "seed": derive(seed, "bridge"),
    });
    let mut env = profile.env.clone();
    env.push(("RELAY_BRIDGE_CONFIG".to_string(), config.to_string()));
    env.push(("MCP_BEARER_TOKEN".to_string(), RelayerConfig::default().token));
    env
}

/// The scripted client on a thread of its own (its events are the `client` host's), joined to
/// the process's stdin and stdout.
fn start_client(
    scenario: &RelayScenario,
    seed: u64,
    recorder: &Recorder,
    close_stdin: Arc<Notify>,
    stdin: ChildStdin,
    stdout: ChildStdout,
) -> (tokio::sync::oneshot::Receiver<()>, tokio::sync::oneshot::Receiver<()>) {
    let (script, recorder) = (scenario.script.clone(), recorder.clone());
    let client_seed = derive(seed, "client");
    let (done, finished) = tokio::sync::oneshot::channel();
    let (closed, stdin_closed) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("live-client".into()).spawn(move || {
        tracing::subscriber::with_default(recorder.subscriber(), || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                announce(host::CLIENT);
                let (client_ends, server_ends) = stdio::pipes();
                let stdio::ServerEnds { stdin: mut from_client, stdout: mut to_client } = server_ends;
                let mut stdin = stdin;
                let mut stdout = stdout;
                let input = tokio::task::spawn_local(async move {
                    let _ = tokio::io::copy(&mut from_client, &mut stdin).await;
                    // Dropping the child's stdin is its EOF.
                    drop(stdin);
                    let _ = closed.send(());
                });
                let output = tokio::task::spawn_local(async move {
                    let _ = tokio::io::copy(&mut stdout, &mut to_client).await;
                });
                let _ = client::run(script, client_ends, close_stdin, client_seed).await;
                input.abort();
                output.abort();
            });
        });
        let _ = done.send(());
    });
    if let Err(error) = spawned {
        // The case goes on without a client; its trace shows nothing was sent.
        eprintln!("live: no client thread: {error}");
    }
    (finished, stdin_closed)
}

/// Apply the fault plan (the harness side's, in wall milliseconds) by the wall clock, then heal.
async fn apply_faults(scenario: &RelayScenario, targets: &Targets<'_>, server: &MockServer, proxy: Option<&LinkProxy>, clock: LiveClock) {
    let schedule = family::schedule(&scenario.faults, |fault| fault.window(&scenario.script));
    for scheduled in schedule {
        tokio::time::sleep_until(clock.at_wall(scheduled.at_ms).into()).await;
        let fault = &scenario.faults[scheduled.fault];
        match faults::act(fault, scheduled.phase, targets) {
            Some(NetworkAction::Bounce) => server.restart(),
            Some(action @ (NetworkAction::Hold | NetworkAction::Release)) => {
                if let Some(proxy) = proxy {
                    proxy.hold(action == NetworkAction::Hold);
                }
            }
            None => {}
        }
    }
    emit!(kind::FAULT_INJECTED, fault = "heal", phase = "start", detail = "");
    faults::heal_knobs(targets.knobs);
    if let Some(proxy) = proxy {
        proxy.hold(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_case_ends_an_exit_bound_after_stdin_closes_if_that_is_later_than_the_horizon() {
        // Horizon 30 s, bound 5 s, 1 s of grace: 36 s, unless stdin closed after 30 s.
        assert_eq!(case_end_wall_ms(30_000, 5_000, Speed::REAL, None), 36_000);
        assert_eq!(case_end_wall_ms(30_000, 5_000, Speed::REAL, Some(12_000)), 36_000);
        // live.v1.relay.none.c3ee3e9cfcdc2c70: stdin closed at 33.3 s; the case was cut at 37.7 s.
        assert_eq!(case_end_wall_ms(30_000, 5_000, Speed::REAL, Some(33_300)), 39_300);
    }
}
