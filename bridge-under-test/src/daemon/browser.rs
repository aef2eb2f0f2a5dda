//! The browser, standing for the user: the daemon asks it to open an authorization URL; it
//! approves after the delay its knob says (following the redirect back to the daemon's
//! callback), or never. Every URL it is asked to open is one authorization flow started.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

use super::knobs::{lock, Approval, SharedBrowserKnobs};
use super::BROWSER_PORT;
use crate::emit;
use crate::events::kind;
use crate::net::{http, url};
use crate::seam;

#[derive(Clone)]
struct App {
    knobs: SharedBrowserKnobs,
    flows: Arc<Mutex<u64>>,
}

/// Serve until the simulation ends.
pub async fn run(knobs: SharedBrowserKnobs) -> Result<(), Box<dyn std::error::Error>> {
    let app = App {
        knobs,
        flows: Arc::new(Mutex::new(0)),
    };
    let router = Router::new().route("/open", post(open)).with_state(app);
    http::serve(BROWSER_PORT, router).await?;
    Ok(())
}

/// `POST /open` with the URL as the body: show the prompt; the user acts later.
async fn open(State(app): State<App>, body: String) -> StatusCode {
    let flow = {
        let mut flows = lock(&app.flows);
        *flows += 1;
        *flows
    };
    let state = state_of(&body);
    emit!(kind::BROWSER_PROMPT, flow, state = %state);
    let approval = lock(&app.knobs).approval;
    if let Approval::After(delay_ms) = approval {
        tokio::task::spawn_local(async move {
            seam::sleep_ms(delay_ms).await;
            let status = approve(&body).await;
            emit!(kind::BROWSER_APPROVE, flow, state = %state, status);
        });
    }
    StatusCode::ACCEPTED
}

fn state_of(authorize_url: &str) -> String {
    let query = authorize_url.split_once('?').map_or("", |(_, q)| q);
    url::parse_form(query)
        .get("state")
        .cloned()
        .unwrap_or_default()
}

/// Approve at the authorization server and follow its redirect; the final status (0 when the
/// network failed).
async fn approve(authorize_url: &str) -> u16 {
    let Some(target) = url::parse(authorize_url) else {
        return 0;
    };
    let reply = http::fetch(
        (&target.host, target.port),
        "GET",
        &target.target,
        &[],
        String::new(),
    )
    .await;
    let Some(location) = reply.ok().and_then(|r| r.location) else {
        return 0;
    };
    let Some(back) = url::parse(&location) else {
        return 0;
    };
    let reply = http::fetch(
        (&back.host, back.port),
        "GET",
        &back.target,
        &[],
        String::new(),
    )
    .await;
    reply.map_or(0, |r| r.status)
}
