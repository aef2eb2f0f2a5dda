//! Real HTTP/1.1 over turmoil's simulated TCP, with hyper: the bridge's client side (POST and a
//! streaming GET) and the relayer's accept loop. hyper's automatic `Date` header is off: it
//! reads the wall clock.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::seam::{TcpListener, TcpStream};

/// A task that is aborted when its handle is dropped: nothing outlives its owner.
#[derive(Debug)]
pub struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawn `future` on this host, tied to the returned handle.
pub fn spawn_owned(future: impl std::future::Future<Output = ()> + 'static) -> AbortOnDrop {
    AbortOnDrop(tokio::task::spawn_local(future))
}

fn other(err: impl std::fmt::Display) -> io::Error {
    io::Error::other(err.to_string())
}

/// An open HTTP/1.1 connection: one request after another can go over it (keep-alive). Its
/// task lives as long as this value.
#[derive(Debug)]
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    _task: AbortOnDrop,
}

impl Connection {
    async fn open(host: &str, port: u16) -> io::Result<Self> {
        let stream = TcpStream::connect((host, port)).await?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(other)?;
        let task = spawn_owned(async move {
            let _ = conn.await;
        });
        Ok(Self { sender, _task: task })
    }
}

/// Send one request over `reused` if it is still open, else over a new connection; the
/// response and the connection it came over.
async fn send(
    host: &str,
    port: u16,
    request: Request<Full<Bytes>>,
    reused: Option<Connection>,
) -> io::Result<(Response<Incoming>, Connection)> {
    let request = match reused.filter(|conn| !conn.sender.is_closed()) {
        Some(mut conn) => match conn.sender.try_send_request(request).await {
            Ok(response) => return Ok((response, conn)),
            // The server closed the connection before the request went out: a new one.
            Err(mut error) => error.take_message().ok_or_else(|| other(error.into_error()))?,
        },
        None => request,
    };
    let mut conn = Connection::open(host, port).await?;
    let response = conn.sender.send_request(request).await.map_err(other)?;
    Ok((response, conn))
}

/// The headers every request to the relayer carries.
fn request(method: &str, host: &str, path: &str, token: &str) -> hyper::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", host)
        .header("authorization", format!("Bearer {token}"))
}

/// `POST path` with a JSON body; returns the status. The body is read to the end.
pub async fn post_json(
    target: (&str, u16),
    path: &str,
    token: &str,
    idempotency_key: Option<&str>,
    body: String,
) -> io::Result<u16> {
    let mut builder =
        request("POST", target.0, path, token).header("content-type", "application/json");
    if let Some(key) = idempotency_key {
        builder = builder.header("idempotency-key", key);
    }
    let request = builder.body(Full::new(Bytes::from(body))).map_err(other)?;
    let (response, _conn) = send(target.0, target.1, request, None).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await.map_err(other)?;
    Ok(status)
}

/// An open streaming response body.
pub struct Stream {
    body: Incoming,
    _conn: Connection,
}

impl Stream {
    /// The next chunk of bytes; `None` at the end of the stream.
    pub async fn next_chunk(&mut self) -> Option<io::Result<Bytes>> {
        loop {
            match self.body.frame().await? {
                Ok(frame) => match frame.into_data() {
                    Ok(data) => return Some(Ok(data)),
                    Err(_trailers) => continue,
                },
                Err(err) => return Some(Err(other(err))),
            }
        }
    }
}

/// `GET path` expecting a 200 streaming body (Server-Sent Events).
pub async fn get_stream(target: (&str, u16), path: &str, token: &str) -> io::Result<Stream> {
    let request = request("GET", target.0, path, token)
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .map_err(other)?;
    let (response, conn) = send(target.0, target.1, request, None).await?;
    if response.status() != StatusCode::OK {
        return Err(other(format!("stream refused with HTTP {}", response.status().as_u16())));
    }
    Ok(Stream { body: response.into_body(), _conn: conn })
}

/// A response body fed from a channel: each message is one chunk, the end of the channel is the
/// end of the body. Used for Server-Sent Events.
pub struct ChannelBody(pub mpsc::UnboundedReceiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// Put in a response's extensions to have the connection reset instead of the response
/// written: the client reads a network error (a proxy or load balancer dropping the connection).
#[derive(Debug, Clone, Copy)]
pub struct ResetConnection;

/// Serve `router` on `port` forever: one task per connection, `Date` header off. A response
/// marked [`ResetConnection`] ends its connection unanswered.
pub async fn serve(port: u16, router: axum::Router) -> io::Result<()> {
    serve_on(TcpListener::bind(("0.0.0.0", port)).await?, router).await
}

/// [`serve`] on a listener bound beforehand.
pub async fn serve_on(listener: TcpListener, router: axum::Router) -> io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let service = Resettable(TowerToHyperService::new(router.clone()));
        tokio::task::spawn_local(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .auto_date_header(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The router as a hyper service whose error (for a [`ResetConnection`] response) makes hyper
/// drop the connection without writing anything.
struct Resettable(TowerToHyperService<axum::Router>);

type Served = Pin<Box<dyn std::future::Future<Output = io::Result<axum::response::Response>>>>;

impl hyper::service::Service<Request<Incoming>> for Resettable {
    type Response = axum::response::Response;
    type Error = io::Error;
    type Future = Served;

    fn call(&self, request: Request<Incoming>) -> Served {
        let response = self.0.call(request);
        Box::pin(async move {
            let response = response.await.unwrap_or_else(|never: Infallible| match never {});
            if response.extensions().get::<ResetConnection>().is_some() {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset (fault)"));
            }
            Ok(response)
        })
    }
}

/// A whole HTTP response: the status, the headers the daemon family reads, and the body text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// `Location`, for redirects.
    pub location: Option<String>,
    /// `WWW-Authenticate`, for 401s.
    pub www_authenticate: Option<String>,
    pub body: String,
}

/// Kept-alive connections by server, for a client that talks to several: a request takes an
/// idle connection to its server (or opens one) and gives it back when the server kept it open.
#[derive(Debug, Default)]
pub struct Pool(RefCell<BTreeMap<(String, u16), Vec<Connection>>>);

impl Pool {
    /// [`fetch`] over a kept connection to `target` when there is one.
    pub async fn fetch(
        &self,
        target: (&str, u16),
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: String,
    ) -> io::Result<Reply> {
        let key = (target.0.to_string(), target.1);
        let reused = self.0.borrow_mut().get_mut(&key).and_then(Vec::pop);
        let (reply, kept) = fetch_on(reused, target, method, path, headers, body).await?;
        if let Some(conn) = kept {
            self.0.borrow_mut().entry(key).or_default().push(conn);
        }
        Ok(reply)
    }

    /// Close the idle connections to `target`.
    pub fn close(&self, target: (&str, u16)) {
        self.0.borrow_mut().remove(&(target.0.to_string(), target.1));
    }
}

/// Send one request with `headers` and `body` over a connection of its own, and read the whole
/// response.
pub async fn fetch(
    target: (&str, u16),
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: String,
) -> io::Result<Reply> {
    Ok(fetch_on(None, target, method, path, headers, body).await?.0)
}

/// [`fetch`] over `reused` when it is still open (else a new connection), handing back the
/// connection for the next request when the server keeps it open.
async fn fetch_on(
    reused: Option<Connection>,
    target: (&str, u16),
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: String,
) -> io::Result<(Reply, Option<Connection>)> {
    let mut builder = Request::builder().method(method).uri(path).header("host", target.0);
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    let request = builder.body(Full::new(Bytes::from(body))).map_err(other)?;
    let (response, conn) = send(target.0, target.1, request, reused).await?;
    let header = |name: &str| {
        response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    };
    let (location, www_authenticate) = (header("location"), header("www-authenticate"));
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(other)?.to_bytes();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    let kept = (!conn.sender.is_closed()).then_some(conn);
    Ok((Reply { status, location, www_authenticate, body }, kept))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    use hyper::service::service_fn;

    use super::*;

    /// A server that answers every request with the client's address, so a test can tell which
    /// connection a request came over; with `close`, it ends each connection after one reply.
    async fn peer_echo(close: bool) -> turmoil::Result {
        let listener = TcpListener::bind(("0.0.0.0", 80)).await?;
        loop {
            let (stream, peer) = listener.accept().await?;
            tokio::task::spawn_local(async move {
                let service = service_fn(move |_: Request<Incoming>| async move {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(peer.to_string()))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(!close)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// The peers two requests in a row through one pool were seen from.
    fn two_requests(close: bool) -> Vec<String> {
        let mut sim = turmoil::Builder::new().build();
        sim.host("server", move || peer_echo(close));
        let seen = Rc::new(RefCell::new(Vec::new()));
        let out = seen.clone();
        sim.client("client", async move {
            let pool = Pool::default();
            for _ in 0..2 {
                let reply = pool.fetch(("server", 80), "GET", "/", &[], String::new()).await?;
                out.borrow_mut().push(reply.body);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(())
        });
        sim.run().unwrap();
        seen.take()
    }

    #[test]
    fn a_kept_connection_carries_the_next_request() {
        let peers = two_requests(false);
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0], peers[1], "the second request opened a new connection");
    }

    #[test]
    fn a_connection_the_server_closed_is_replaced() {
        let peers = two_requests(true);
        assert_eq!(peers.len(), 2);
        assert_ne!(peers[0], peers[1], "both requests claim the same connection");
    }
}
