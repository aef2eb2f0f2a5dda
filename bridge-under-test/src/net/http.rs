//! Real HTTP/1.1 over turmoil's simulated TCP, with hyper: the bridge's client side (POST and a
//! streaming GET) and the relayer's accept loop. hyper's automatic `Date` header is off: it
//! reads the wall clock.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
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

/// Open a connection and send one request; the connection task lives as long as the result.
async fn send(
    host: &str,
    port: u16,
    request: Request<Full<Bytes>>,
) -> io::Result<(Response<Incoming>, AbortOnDrop)> {
    let stream = TcpStream::connect((host, port)).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(other)?;
    let conn = spawn_owned(async move {
        let _ = conn.await;
    });
    let response = sender.send_request(request).await.map_err(other)?;
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
    let (response, _conn) = send(target.0, target.1, request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await.map_err(other)?;
    Ok(status)
}

/// An open streaming response body.
pub struct Stream {
    body: Incoming,
    _conn: AbortOnDrop,
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
    let (response, conn) = send(target.0, target.1, request).await?;
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

/// Serve `router` on `port` forever: one task per connection, `Date` header off.
pub async fn serve(port: u16, router: axum::Router) -> io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let service = TowerToHyperService::new(router.clone());
        tokio::task::spawn_local(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .auto_date_header(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
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

/// Send one request with `headers` and `body`, and read the whole response.
pub async fn fetch(
    target: (&str, u16),
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: String,
) -> io::Result<Reply> {
    let mut builder = Request::builder().method(method).uri(path).header("host", target.0);
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    let request = builder.body(Full::new(Bytes::from(body))).map_err(other)?;
    let (response, _conn) = send(target.0, target.1, request).await?;
    let header = |name: &str| {
        response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    };
    let (location, www_authenticate) = (header("location"), header("www-authenticate"));
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(other)?.to_bytes();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    Ok(Reply { status, location, www_authenticate, body })
}
