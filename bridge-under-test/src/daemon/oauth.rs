//! The mock authorization server: RFC 8414 metadata, RFC 7591 dynamic client registration,
//! `/authorize` (reached only when the user approves in the browser: it issues the code) and
//! `/token` (authorization-code exchange with PKCE S256). Codes and tokens come from a seeded
//! RNG. Issued tokens go into [`SharedIssued`], which the MCP server trusts, as a resource
//! server trusts its authorization server's signing key.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::knobs::lock;
use super::{pkce, OAUTH_PORT};
use crate::emit;
use crate::events::{host, kind};
use crate::net::{http, url};
use crate::rng::SimRng;

/// How long an access token lives unless a fault says otherwise: an hour, as real servers.
pub const TOKEN_LIFETIME_MS: u64 = 3_600_000;

/// Access tokens the authorization server has issued, each with its expiry on the simulation's
/// clock, and the faults' settings: the lifetime it gives new ones, the endpoints it wedges.
#[derive(Debug)]
pub struct Issued {
    pub lifetime_ms: u64,
    /// Paths (`/token`, `/register`, `/.well-known/oauth-authorization-server`) whose requests
    /// are accepted and never answered: a wedged authorization server.
    pub wedged: BTreeSet<String>,
    access: BTreeMap<String, u64>,
}

/// The authorization server's endpoints a client calls, as a wedge names them.
pub const ENDPOINTS: &[&str] = &["/.well-known/oauth-authorization-server", "/register", "/token"];

impl Default for Issued {
    fn default() -> Self {
        Self {
            lifetime_ms: TOKEN_LIFETIME_MS,
            wedged: BTreeSet::new(),
            access: BTreeMap::new(),
        }
    }
}

impl Issued {
    /// Whether `token` was issued here and has not expired: a resource server refuses an
    /// expired token as a real one does.
    pub fn valid(&self, token: &str) -> bool {
        self.access.get(token).is_some_and(|expires| sim_ms() < *expires)
    }

    fn issue(&mut self, token: String) {
        let expires = sim_ms().saturating_add(self.lifetime_ms);
        self.access.insert(token, expires);
    }
}

/// The simulation's clock, shared by every host (each host's tokio clock has its own origin).
fn sim_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub type SharedIssued = Arc<Mutex<Issued>>;

/// This server's base URL.
pub fn issuer() -> String {
    format!("http://{}:{OAUTH_PORT}", host::OAUTH)
}

/// A code waiting to be exchanged.
struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    /// The authorization request's `state`: which flow the code's tokens resolve.
    state: String,
    used: bool,
}

struct Inner {
    rng: SimRng,
    /// client id → registered redirect URIs.
    clients: BTreeMap<String, Vec<String>>,
    codes: BTreeMap<String, Grant>,
    /// Refresh token → (client id, used): each is good for one refresh (rotation).
    refresh: BTreeMap<String, (String, bool)>,
    issued: SharedIssued,
}

#[derive(Clone)]
struct App(Arc<Mutex<Inner>>);

/// Serve until the simulation ends.
pub async fn run(seed: u64, issued: SharedIssued) -> Result<(), Box<dyn std::error::Error>> {
    let inner = Inner {
        rng: SimRng::new(seed),
        clients: BTreeMap::new(),
        codes: BTreeMap::new(),
        refresh: BTreeMap::new(),
        issued,
    };
    let router = Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token));
    let app = App(Arc::new(Mutex::new(inner)));
    let router = router
        .layer(middleware::from_fn_with_state(app.clone(), wedge))
        .with_state(app);
    http::serve(OAUTH_PORT, router).await?;
    Ok(())
}

/// A request to a wedged endpoint is read and never answered. The fault's event names the flow a
/// held code exchange belongs to (its `state`), so the checkers see the daemon used the code.
async fn wedge(State(app): State<App>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let wedged = lock(&lock(&app.0).issued).wedged.contains(&path);
    if wedged {
        let body = axum::body::to_bytes(request.into_body(), usize::MAX).await.unwrap_or_default();
        let state = flow_of(&app, &url::parse_form(&String::from_utf8_lossy(&body)));
        emit!(kind::FAULT_FIRED, fault = "wedged_method", method = %path, state = %state);
        return std::future::pending::<Response>().await;
    }
    next.run(request).await
}

async fn metadata() -> Json<Value> {
    let base = issuer();
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"]
    }))
}

/// The standard OAuth error body (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn register(State(app): State<App>, Json(body): Json<Value>) -> Response {
    let uris: Vec<String> = body
        .get("redirect_uris")
        .and_then(Value::as_array)
        .map(|uris| {
            uris.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_redirect_uri",
            "redirect_uris is required",
        );
    }
    let mut inner = lock(&app.0);
    let client_id = format!("client-{}", inner.rng.hex(12));
    inner.clients.insert(client_id.clone(), uris.clone());
    drop(inner);
    emit!(kind::OAUTH_REGISTER, client_id = %client_id);
    let body = json!({
        "client_id": client_id,
        "redirect_uris": uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"]
    });
    (StatusCode::CREATED, Json(body)).into_response()
}

/// The user approved: issue a code and send the browser back to the client's redirect URI.
async fn authorize(
    State(app): State<App>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let (client_id, redirect_uri, state) =
        (field("client_id"), field("redirect_uri"), field("state"));
    let mut inner = lock(&app.0);
    let known = inner
        .clients
        .get(&client_id)
        .is_some_and(|uris| uris.contains(&redirect_uri));
    let pkce_ok = field("code_challenge_method") == "S256" && !field("code_challenge").is_empty();
    let ok = known && pkce_ok && field("response_type") == "code";
    if !ok {
        drop(inner);
        emit!(kind::OAUTH_AUTHORIZE, client_id = %client_id, state = %state, ok = false);
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "unknown client, redirect URI or PKCE",
        );
    }
    let code = format!("code-{}", inner.rng.hex(16));
    let grant = Grant {
        client_id: client_id.clone(),
        redirect_uri: redirect_uri.clone(),
        challenge: field("code_challenge"),
        state: state.clone(),
        used: false,
    };
    inner.codes.insert(code.clone(), grant);
    drop(inner);
    emit!(kind::OAUTH_AUTHORIZE, client_id = %client_id, state = %state, ok = true);
    let location = format!(
        "{redirect_uri}?{}",
        url::form(&[("code", &code), ("state", &state)])
    );
    (StatusCode::FOUND, [("location", location)]).into_response()
}

/// The flow (`state`) a token request's code exchange belongs to: empty for a refresh or an
/// unknown code.
fn flow_of(app: &App, form: &BTreeMap<String, String>) -> String {
    let exchange = form.get("grant_type").is_some_and(|grant| grant == "authorization_code");
    let code = form.get("code").filter(|_| exchange);
    code.and_then(|code| lock(&app.0).codes.get(code).map(|g| g.state.clone())).unwrap_or_default()
}

async fn token(State(app): State<App>, body: String) -> Response {
    let form = url::parse_form(&body);
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let client_id = field("client_id");
    let grant = form.get("grant_type").cloned().unwrap_or_default();
    let state = flow_of(&app, &form);
    let outcome = if grant == "refresh_token" {
        refresh(&app, &form)
    } else {
        exchange(&app, &form)
    };
    let lifetime_ms = lock(&lock(&app.0).issued).lifetime_ms;
    emit!(
        kind::OAUTH_TOKEN,
        client_id = %client_id,
        grant = %grant,
        state = %state,
        ok = outcome.is_ok(),
        error = outcome.as_ref().err().map_or("", |(error, _)| *error),
        lifetime_ms
    );
    match outcome {
        Ok((token, refresh_token)) => {
            let body = json!({
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": lifetime_ms.div_ceil(1_000),
                "refresh_token": refresh_token
            });
            (StatusCode::OK, Json(body)).into_response()
        }
        Err((error, description)) => oauth_error(StatusCode::BAD_REQUEST, error, &description),
    }
}

/// What the token endpoint gives: an access token and a refresh token, or an RFC 6749 error.
type Tokens = Result<(String, String), (&'static str, String)>;

/// Issue a fresh access token and refresh token to `client_id`.
fn issue(inner: &mut Inner, client_id: &str) -> (String, String) {
    let token = format!("token-{}", inner.rng.hex(24));
    let refresh = format!("refresh-{}", inner.rng.hex(24));
    lock(&inner.issued).issue(token.clone());
    inner.refresh.insert(refresh.clone(), (client_id.to_string(), false));
    (token, refresh)
}

/// A refresh-token grant (RFC 6749 §6): the refresh token must be one this server issued to this
/// client and not yet used; it is rotated.
fn refresh(app: &App, form: &BTreeMap<String, String>) -> Tokens {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let (presented, client_id) = (field("refresh_token"), field("client_id"));
    let mut inner = lock(&app.0);
    let Some((owner, used)) = inner.refresh.get_mut(&presented) else {
        return Err(("invalid_grant", "unknown refresh token".into()));
    };
    if *used {
        return Err(("invalid_grant", "refresh token already used".into()));
    }
    if *owner != client_id {
        return Err(("invalid_grant", "refresh token issued to another client".into()));
    }
    *used = true;
    Ok(issue(&mut inner, &client_id))
}

/// Check a code exchange; `Err((error, description))` in RFC 6749's vocabulary.
fn exchange(app: &App, form: &BTreeMap<String, String>) -> Tokens {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("grant_type") != "authorization_code" {
        return Err((
            "unsupported_grant_type",
            format!("grant_type {:?}", field("grant_type")),
        ));
    }
    let (code, verifier) = (field("code"), field("code_verifier"));
    if code.is_empty() || verifier.is_empty() || field("redirect_uri").is_empty() {
        return Err((
            "invalid_request",
            "code, code_verifier and redirect_uri are required".into(),
        ));
    }
    let mut inner = lock(&app.0);
    let Some(grant) = inner.codes.get_mut(&code) else {
        return Err(("invalid_grant", "unknown authorization code".into()));
    };
    if grant.used {
        return Err(("invalid_grant", "authorization code already used".into()));
    }
    if grant.redirect_uri != field("redirect_uri") || grant.client_id != field("client_id") {
        return Err((
            "invalid_grant",
            "redirect_uri or client_id does not match the code".into(),
        ));
    }
    if pkce::challenge(&verifier) != grant.challenge {
        return Err(("invalid_grant", "PKCE verification failed".into()));
    }
    grant.used = true;
    let client_id = grant.client_id.clone();
    Ok(issue(&mut inner, &client_id))
}
