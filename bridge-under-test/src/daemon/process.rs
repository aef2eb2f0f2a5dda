//! The daemon host: a supervisor that runs the process table's daemon processes (one task per
//! pid, killed by dropping it, like `kill -9`), and one daemon process: its socket listener, its
//! OAuth callback listener, its metadata file, and the state its requests share.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;

use super::authorize::{self, SharedCallbacks};
use super::config::{Rules, POLL_MS};
use super::knobs::{self, SharedDaemonKnobs};
use super::machine::{Exit, Machine, Metadata};
use super::upstream::Session;
use super::{port, serve, CALLBACK_BASE, SOCKET_BASE};
use crate::emit;
use crate::events::kind;
use crate::net::http::{self, spawn_owned, AbortOnDrop};
use crate::rng::SimRng;
use crate::seam::{self, TcpListener};

/// What every daemon process is configured with.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub rules: Rules,
    /// Seed of the daemon's randomness (PKCE verifiers, OAuth state); mixed with the pid.
    pub seed: u64,
}

/// One daemon process, shared by its connection tasks.
pub struct Ctx {
    pub pid: u64,
    pub rules: Rules,
    pub knobs: SharedDaemonKnobs,
    pub callbacks: SharedCallbacks,
    pub state: RefCell<ProcessState>,
    /// The process's HTTP connections to the MCP and authorization servers, kept open between
    /// requests.
    pub http: http::Pool,
    /// Notified when a `stop` has been answered.
    pub stop: Notify,
    /// Milliseconds since the daemon host booted, for the metadata's `startedAt`.
    pub started_at: u64,
    /// The config file's fingerprint when this process started: written into the metadata.
    pub fingerprint: String,
    /// The protocol version this process speaks (1: no `protocolVersion`, no
    /// `activeRequests`, no frames).
    pub protocol_version: u64,
}

/// Mutable process state; never borrowed across an await.
pub struct ProcessState {
    pub upstream: Session,
    /// Requests whose work has not ended.
    pub active: u64,
    pub rng: SimRng,
    /// The id of the request admitted last: what a daemon that mixes up its connections writes
    /// on another one (the crossed-frames fault).
    pub last_request: String,
    /// A `stop` was accepted: the process is going, and reads no new request.
    pub stopping: bool,
}

/// The daemon host's software: launch and kill processes as the process table asks.
pub async fn supervise(
    machine: Rc<Machine>,
    config: DaemonConfig,
    knobs: SharedDaemonKnobs,
) -> Result<(), Box<dyn std::error::Error>> {
    let boot = seam::now();
    let mut running: BTreeMap<u64, AbortOnDrop> = BTreeMap::new();
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<(u64, Exit)>();
    loop {
        let changed = machine.changed.notified();
        while let Some(pid) = machine.take_launch() {
            let (protocol_version, _) = machine.launched_with(pid);
            emit!(kind::DAEMON_LAUNCH, pid, protocol_version);
            let started_at = seam::ms_since(boot);
            let process = launch(pid, started_at, &config, &knobs, &machine, exit_tx.clone());
            running.insert(pid, spawn_owned(process));
        }
        while let Some((pid, why)) = machine.take_kill() {
            if running.remove(&pid).is_some() {
                emit!(kind::DAEMON_EXIT, pid, reason = why.name());
                machine.exited(pid, why);
            }
        }
        tokio::select! {
            () = changed => {}
            Some((pid, why)) = exit_rx.recv() => {
                running.remove(&pid);
                emit!(kind::DAEMON_EXIT, pid, reason = why.name());
                machine.exited(pid, why);
            }
        }
    }
}

fn launch(
    pid: u64,
    started_at: u64,
    config: &DaemonConfig,
    knobs: &SharedDaemonKnobs,
    machine: &Rc<Machine>,
    exit_tx: mpsc::UnboundedSender<(u64, Exit)>,
) -> impl std::future::Future<Output = ()> + 'static {
    let (protocol_version, fingerprint) = machine.launched_with(pid);
    let state = ProcessState {
        upstream: Session::default(),
        active: 0,
        last_request: String::new(),
        stopping: false,
        rng: SimRng::new(config.seed ^ crate::rng::mix(pid)),
    };
    let ctx = Rc::new(Ctx {
        pid,
        rules: config.rules,
        knobs: knobs.clone(),
        callbacks: authorize::callbacks(),
        state: RefCell::new(state),
        http: http::Pool::default(),
        stop: Notify::new(),
        started_at,
        fingerprint,
        protocol_version,
    });
    let machine = machine.clone();
    async move {
        let why = run(ctx.clone(), &machine).await.unwrap_or(Exit::Stop);
        knobs::wait_while(&ctx.knobs, |k| k.hang).await;
        // Only the daemon the metadata names removes it (and its socket goes with the process).
        machine.remove_metadata_of(pid);
        let _ = exit_tx.send((pid, why));
    }
}

/// Listen, write the metadata, serve connections until a `stop` is answered, or until the
/// metadata names another daemon and no connection is left (a peer superseded this one).
async fn run(ctx: Rc<Ctx>, machine: &Machine) -> std::io::Result<Exit> {
    knobs::wait_while(&ctx.knobs, |k| k.hang).await;
    let socket = port(SOCKET_BASE, ctx.pid);
    let listener = TcpListener::bind(("0.0.0.0", socket)).await?;
    let router = authorize::callback_router(ctx.callbacks.clone());
    let callback_port = port(CALLBACK_BASE, ctx.pid);
    let _callbacks = spawn_owned(async move {
        let _ = http::serve(callback_port, router).await;
    });
    machine.write_metadata(Metadata {
        pid: ctx.pid,
        protocol_version: ctx.protocol_version,
        socket,
        config_fingerprint: ctx.fingerprint.clone(),
        started_at: ctx.started_at,
    });
    emit!(
        kind::DAEMON_START,
        pid = ctx.pid,
        socket,
        protocol_version = ctx.protocol_version,
        config = %ctx.fingerprint
    );
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                connections.spawn_local(serve::connection(ctx.clone(), stream));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = ctx.stop.notified() => return Ok(Exit::Stop),
            () = seam::sleep_ms(POLL_MS) => {
                // Nothing left in flight means every connection served, not only every work
                // counted: a response still waiting to be written (a stalled loop) dies with
                // the process, and its client runs the action again elsewhere (soak token
                // v1.daemon.none.83de4b1d805e3f93).
                let superseded = machine.metadata().is_some_and(|m| m.pid != ctx.pid);
                if superseded && connections.is_empty() {
                    return Ok(Exit::Superseded);
                }
            }
        }
    }
}
