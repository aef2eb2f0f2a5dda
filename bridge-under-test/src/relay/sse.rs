//! Server-Sent Events framing: an incremental parser for the bridge and a frame encoder for the
//! relayer. Frames end with a blank line; lines starting with `:` are comments (keep-alives).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed it bytes as they arrive, in chunks of any size.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Consume `bytes`, returning the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
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

/// Encode one event frame.
pub fn frame(event: &str, data: &str) -> String {
    let mut out = format!("event: {event}\n");
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A keep-alive comment frame: no data, but it is stream activity.
pub const KEEPALIVE: &str = ": keep-alive\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_any_chunking() {
        let stream = format!(
            "{}{}{}",
            frame("endpoint", "/messages?sessionId=s1"),
            KEEPALIVE,
            frame("message", "{\"a\":1}\n{\"b\":2}")
        );
        let expected = vec![
            SseEvent { event: "endpoint".into(), data: "/messages?sessionId=s1".into() },
            SseEvent { event: "message".into(), data: "{\"a\":1}\n{\"b\":2}".into() },
        ];
        for chunk in 1..stream.len() {
            let mut parser = SseParser::default();
            let events: Vec<SseEvent> =
                stream.as_bytes().chunks(chunk).flat_map(|c| parser.feed(c)).collect();
            assert_eq!(events, expected, "chunk size {chunk}");
        }
    }

    #[test]
    fn crlf_and_default_event_name() {
        let mut parser = SseParser::default();
        let events = parser.feed(b"data:x\r\n\r\n:comment\r\n\r\n");
        assert_eq!(events, vec![SseEvent { event: "message".into(), data: "x".into() }]);
    }
}
