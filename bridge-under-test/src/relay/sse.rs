//! Server-Sent Events framing: an incremental parser for the bridge and a frame encoder for the
//! relayer. Frames end with a blank line; lines starting with `:` are comments (keep-alives).
//!
//! The parser follows the WHATWG event-stream grammar, which is why it is ours and not the
//! `sse-stream` crate rmcp uses: that crate ends the stream with an error on lines the
//! specification tells a client to accept (an unknown field, a field without a colon, a second
//! `event:` or `id:` in one event, a `retry:` that is not a number). The test
//! `sse_stream_crate_rejects_what_the_spec_accepts` measures it (see ARCHITECTURE.md).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed it bytes as they arrive, in chunks of any size. Lines end with LF,
/// CRLF or a lone CR, as the specification allows a server (a CRLF split across two chunks is
/// one line end); a leading byte-order mark, comment lines and fields other than `event` and
/// `data` (`id`, `retry`, any unknown name) are ignored.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The first line has been read (only it may start with a byte-order mark).
    past_first_line: bool,
    event: Option<String>,
    data: Option<String>,
    /// The previous byte was a CR that ended a line: an LF right after it belongs to it.
    after_cr: bool,
}

impl SseParser {
    /// Consume `bytes`, returning the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            if byte == b'\n' && after_cr {
                continue;
            }
            if byte != b'\n' && byte != b'\r' {
                self.line.push(byte);
                continue;
            }
            let line = String::from_utf8_lossy(&self.line).into_owned();
            self.line.clear();
            if let Some(event) = self.take_line(&line) {
                out.push(event);
            }
        }
        out
    }

    fn take_line(&mut self, line: &str) -> Option<SseEvent> {
        let line = if std::mem::replace(&mut self.past_first_line, true) {
            line
        } else {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            let data = self.data.take();
            let event = self.event.take().unwrap_or_else(|| "message".to_string());
            return data.map(|data| SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        None
    }
}

/// How one stream writes its frames. Real servers differ in every one of these, and the SSE
/// specification allows each, so the relayer draws one per stream and the bridge's parser
/// meets them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// The line terminator: LF, CRLF or a lone CR.
    pub eol: Eol,
    /// `data: x` (a space after the colon, which the parser strips) or `data:x`.
    pub space: bool,
    /// `event: message` written out, or left off (`message` is the default name).
    pub name_messages: bool,
    /// An `id:` line on every event (the bridge ignores it).
    pub event_ids: bool,
    /// A reply's JSON pretty-printed over several `data:` lines rather than one.
    pub multiline: bool,
    /// A comment line between the fields of every event.
    pub inline_comments: bool,
    /// A `retry:` line before the first event (the bridge keeps its own backoff).
    pub retry: bool,
    /// The endpoint event names an absolute URL (`http://relayer:8080/messages?...`) rather than
    /// a path (`/messages?...`).
    pub absolute_endpoint: bool,
    /// The stream starts with a UTF-8 byte-order mark, which a client must skip.
    pub bom: bool,
    /// Every event carries a field of a name the specification does not define (a client
    /// ignores it) and a bare `id` line without a colon (an empty id).
    pub extra_fields: bool,
}

/// A line terminator the specification allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eol {
    Lf,
    CrLf,
    Cr,
}

impl Eol {
    fn text(self) -> &'static str {
        match self {
            Self::Lf => "\n",
            Self::CrLf => "\r\n",
            Self::Cr => "\r",
        }
    }
}

impl Style {
    /// The plain form: LF, `field: value`, every event named, nothing extra.
    pub const PLAIN: Self = Self {
        eol: Eol::Lf,
        space: true,
        name_messages: true,
        event_ids: false,
        multiline: false,
        inline_comments: false,
        retry: false,
        absolute_endpoint: false,
        bom: false,
        extra_fields: false,
    };

    /// A style drawn from `bits` (a seeded draw): each choice independent.
    pub fn from_bits(bits: u64) -> Self {
        let bit = |n: u32| bits >> n & 1 == 1;
        Self {
            eol: match (bits & 0xFF) % 3 {
                0 => Eol::Lf,
                1 => Eol::CrLf,
                _ => Eol::Cr,
            },
            space: bit(8),
            name_messages: bit(9),
            event_ids: bit(10),
            multiline: bit(11),
            inline_comments: bit(12),
            retry: bit(13),
            absolute_endpoint: bit(14),
            bom: bit(15),
            extra_fields: bit(16),
        }
    }

    /// A short label for the trace: `eol` then each departure from the plain form.
    pub fn label(&self) -> String {
        let mut parts = vec![match self.eol {
            Eol::Lf => "lf",
            Eol::CrLf => "crlf",
            Eol::Cr => "cr",
        }];
        let flags = [
            (!self.space, "nospace"),
            (!self.name_messages, "unnamed"),
            (self.event_ids, "ids"),
            (self.multiline, "multiline"),
            (self.inline_comments, "comments"),
            (self.retry, "retry"),
            (self.absolute_endpoint, "absolute"),
            (self.bom, "bom"),
            (self.extra_fields, "fields"),
        ];
        parts.extend(flags.iter().filter(|(on, _)| *on).map(|(_, name)| *name));
        parts.join("+")
    }

    /// The JSON text of a reply as this stream writes it.
    pub fn json(&self, msg: &serde_json::Value) -> String {
        if self.multiline {
            serde_json::to_string_pretty(msg).unwrap_or_else(|_| msg.to_string())
        } else {
            msg.to_string()
        }
    }

    /// The stream's first bytes: the optional `retry:` line and the endpoint event for `path`
    /// on `authority` (`host:port`).
    pub fn opening(&self, authority: &str, path: &str) -> String {
        let mut out = String::new();
        if self.bom {
            out.push('\u{feff}');
        }
        if self.retry {
            out.push_str(&self.field("retry", "3000"));
        }
        let endpoint = if self.absolute_endpoint { format!("http://{authority}{path}") } else { path.to_string() };
        out.push_str(&self.frame("endpoint", &endpoint, None));
        out
    }

    /// One event frame; `id` goes on an `id:` line when the style writes them.
    pub fn frame(&self, event: &str, data: &str, id: Option<u64>) -> String {
        let mut out = String::new();
        if event != "message" || self.name_messages {
            out.push_str(&self.field("event", event));
        }
        if self.inline_comments {
            out.push_str(&self.comment("frame"));
        }
        if let (true, Some(id)) = (self.event_ids, id) {
            out.push_str(&self.field("id", &id.to_string()));
        }
        if self.extra_fields {
            out.push_str(&self.field("x-relay-frame", event));
            out.push_str(&format!("id{}", self.eol.text()));
        }
        for line in data.split('\n') {
            out.push_str(&self.field("data", line));
        }
        out.push_str(self.eol.text());
        out
    }

    /// A keep-alive comment frame: no data, but it is stream activity.
    pub fn keepalive(&self) -> String {
        format!("{}{}", self.comment("keep-alive"), self.eol.text())
    }

    fn field(&self, name: &str, value: &str) -> String {
        let space = if self.space { " " } else { "" };
        format!("{name}:{space}{value}{}", self.eol.text())
    }

    fn comment(&self, text: &str) -> String {
        format!(": {text}{}", self.eol.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(stream: &str, chunk: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        stream.as_bytes().chunks(chunk).flat_map(|c| parser.feed(c)).collect()
    }

    /// Every style the relayer can draw, through every chunking, gives the same events: the
    /// endpoint, then each reply's JSON (as a value: pretty-printing only adds whitespace).
    #[test]
    fn every_style_survives_any_chunking() {
        let reply = serde_json::json!({"id": 1, "jsonrpc": "2.0", "result": {"text": "a: b\n c"}});
        let every = (0..3u64).flat_map(|eol| (0..512u64).map(move |flags| eol | flags << 8));
        for bits in every {
            let style = Style::from_bits(bits);
            let stream = format!(
                "{}{}{}{}",
                style.opening("relayer:8080", "/messages?sessionId=s1"),
                style.keepalive(),
                style.frame("message", &style.json(&reply), Some(1)),
                style.frame("message", "{}", Some(2)),
            );
            let endpoint = if style.absolute_endpoint {
                "http://relayer:8080/messages?sessionId=s1"
            } else {
                "/messages?sessionId=s1"
            };
            for chunk in [1, 2, 3, 5, 7, 64, stream.len()] {
                let events = parse_in_chunks(&stream, chunk);
                let label = style.label();
                assert_eq!(events.len(), 3, "{label} chunk {chunk}: {events:?}");
                assert_eq!(events[0], SseEvent { event: "endpoint".into(), data: endpoint.into() }, "{label}");
                assert_eq!(events[1].event, "message", "{label}");
                let parsed: serde_json::Value = serde_json::from_str(&events[1].data).expect("JSON");
                assert_eq!(parsed, reply, "{label} chunk {chunk}");
                assert_eq!(events[2], SseEvent { event: "message".into(), data: "{}".into() }, "{label}");
            }
        }
    }

    #[test]
    fn line_ends_of_every_kind_and_the_default_event_name() {
        let mut parser = SseParser::default();
        let events = parser.feed(b"data:x\r\n\r\n:comment\r\rdata: y\r\rdata: z\n\n");
        let message = |data: &str| SseEvent { event: "message".into(), data: data.into() };
        assert_eq!(events, vec![message("x"), message("y"), message("z")]);
        // A CR at the end of one chunk and its LF at the start of the next are one line end.
        let mut parser = SseParser::default();
        let mut events = parser.feed(b"data: a\r");
        events.extend(parser.feed(b"\ndata: b\r\n\r\n"));
        assert_eq!(events, vec![message("a\nb")]);
    }

    /// Streams the specification tells a client to accept, each with the events it dispatches.
    fn spec_cases() -> Vec<(&'static str, &'static [u8], Vec<SseEvent>)> {
        let message = |data: &str| SseEvent { event: "message".into(), data: data.into() };
        vec![
            ("a byte-order mark", b"\xEF\xBB\xBFdata: a\n\n", vec![message("a")]),
            ("an unknown field", b"x-relay-frame: message\ndata: a\n\n", vec![message("a")]),
            ("a field without a colon", b"id\ndata: a\n\n", vec![message("a")]),
            (
                "a second event line (the last wins)",
                b"event: x\nevent: message\ndata: a\n\n",
                vec![message("a")],
            ),
            ("a second id line", b"id: 1\nid: 2\ndata: a\n\n", vec![message("a")]),
            ("a retry that is not a number", b"retry: soon\ndata: a\n\n", vec![message("a")]),
            ("an event with no data (not dispatched)", b"event: x\n\ndata: a\n\n", vec![message("a")]),
        ]
    }

    #[test]
    fn every_spec_case_dispatches_its_events() {
        for (what, bytes, expected) in spec_cases() {
            for chunk in [1, 2, bytes.len()] {
                let mut parser = SseParser::default();
                let events: Vec<_> = bytes.chunks(chunk).flat_map(|c| parser.feed(c)).collect();
                assert_eq!(events, expected, "{what}, chunks of {chunk}");
            }
        }
    }

    /// The measured reason this parser is ours (ARCHITECTURE.md, "relay/sse.rs"): `sse-stream`,
    /// the parser rmcp's SSE transports use, ends the stream with an error, or dispatches an
    /// event with no data, on streams the specification accepts. A bridge built on it would drop
    /// a real server's stream at its first such line. When a release of the crate passes a case
    /// this test fails, and the swap is worth weighing again.
    #[test]
    fn sse_stream_crate_rejects_what_the_spec_accepts() {
        use futures_util::StreamExt;
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let mut failed = Vec::new();
        for (what, bytes, expected) in spec_cases() {
            let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(bytes))]);
            let parsed: Vec<_> = runtime.block_on(sse_stream::SseStream::from_bytes_stream(chunks).collect());
            let events: Result<Vec<_>, _> = parsed
                .into_iter()
                .map(|sse| {
                    sse.map(|sse| SseEvent { event: sse.event.unwrap_or_else(|| "message".into()), data: sse.data.unwrap_or_default() })
                })
                .collect();
            match events {
                Ok(events) if events == expected => {}
                other => failed.push((what, format!("{other:?}"))),
            }
        }
        let names: Vec<_> = failed.iter().map(|(what, _)| *what).collect();
        let expected = [
            "an unknown field",
            "a field without a colon",
            "a second event line (the last wins)",
            "a second id line",
            "a retry that is not a number",
            "an event with no data (not dispatched)",
        ];
        assert_eq!(names, expected, "what sse-stream did: {failed:#?}");
    }

    #[test]
    fn plain_style_is_the_classic_form() {
        let style = Style::PLAIN;
        assert_eq!(style.opening("relayer:8080", "/m"), "event: endpoint\ndata: /m\n\n");
        assert_eq!(style.frame("message", "{}", Some(3)), "event: message\ndata: {}\n\n");
        assert_eq!(style.keepalive(), ": keep-alive\n\n");
        assert_eq!(style.label(), "lf");
        assert_eq!(Style::from_bits(2 | 1 << 9 | 1 << 11).label(), "cr+nospace+multiline");
    }
}
