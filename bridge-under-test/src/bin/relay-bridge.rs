//! The relay bridge (MODEL.md §1) as a real stdio process: the same code the simulation runs,
//! with tokio's network and clock through the seam. `relay-bridge [--bug SWITCH]... URL`, where
//! URL is the relayer's stream (`http://127.0.0.1:PORT/sse`). The environment may set
//! `RELAY_BRIDGE_BUGS` (switches, comma-separated), `RELAY_BRIDGE_CONFIG` (a JSON object of
//! `BridgeConfig` fields: the timing a live case runs with) and `MCP_BEARER_TOKEN`.

use std::process::ExitCode;

use bridge_under_test::net::url;
use bridge_under_test::relay::{bridge, BridgeConfig};
use bridge_under_test::{seam, stdio};
use serde_json::Value;

const USAGE: &str = "usage: relay-bridge [--bug SWITCH]... [--seed N] URL";

fn main() -> ExitCode {
    match config_from(std::env::args().skip(1).collect()) {
        Ok(config) => run(config),
        Err(message) => {
            eprintln!("relay-bridge: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The configuration the command line and the environment give.
fn config_from(args: Vec<String>) -> Result<BridgeConfig, String> {
    let mut config = match std::env::var("RELAY_BRIDGE_CONFIG") {
        Ok(json) => overlay(&json)?,
        Err(_) => BridgeConfig::default(),
    };
    let mut bugs: Vec<String> = std::env::var("RELAY_BRIDGE_BUGS")
        .map(|list| list.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    let mut url = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bug" => bugs.push(args.next().ok_or("--bug needs a switch name")?),
            "--seed" => {
                let seed = args.next().ok_or("--seed needs a number")?;
                config.seed = seed.parse().map_err(|_| format!("--seed {seed:?} is not a number"))?;
            }
            "-h" | "--help" => return Err("the relay family's stdio-to-SSE bridge".to_string()),
            _ if url.is_none() && !arg.starts_with('-') => url = Some(arg),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    let url = url.or_else(|| std::env::var("MCP_SERVER_URL").ok()).ok_or("no URL given")?;
    let parsed = url::parse(&url).ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
    (config.relayer, config.relayer_port, config.sse_path) = (parsed.host, parsed.port, parsed.target);
    for bug in &bugs {
        config.bugs.enable(bug)?;
    }
    if let Ok(token) = std::env::var("MCP_BEARER_TOKEN") {
        config.token = token;
    }
    Ok(config)
}

/// `BridgeConfig::default()` with the fields of a JSON object put over it.
fn overlay(json: &str) -> Result<BridgeConfig, String> {
    let bad = |e: serde_json::Error| format!("RELAY_BRIDGE_CONFIG: {e}");
    let Value::Object(fields) = serde_json::from_str::<Value>(json).map_err(bad)? else {
        return Err("RELAY_BRIDGE_CONFIG is not a JSON object".to_string());
    };
    let mut merged = serde_json::to_value(BridgeConfig::default()).map_err(bad)?;
    for (name, value) in fields {
        merged[name] = value;
    }
    serde_json::from_value(merged).map_err(bad)
}

fn run(config: BridgeConfig) -> ExitCode {
    seam::use_real_network();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("relay-bridge: no runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    match local.block_on(&runtime, serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("relay-bridge: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Join the process's stdin and stdout to the bridge's pipes and run it until stdin ends.
async fn serve(config: BridgeConfig) -> Result<(), Box<dyn std::error::Error>> {
    let (client, server) = stdio::pipes();
    let stdio::ClientEnds { stdin: mut to_bridge, stdout: mut from_bridge } = client;
    let input = tokio::task::spawn_local(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_bridge).await;
        // Dropping the pipe is the bridge's stdin EOF.
    });
    let output = tokio::task::spawn_local(async move {
        let mut stdout = tokio::io::stdout();
        let _ = tokio::io::copy(&mut from_bridge, &mut stdout).await;
        let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
    });
    bridge::run(config, server).await?;
    output.await?;
    input.abort();
    Ok(())
}
