//! Just enough URL handling for OAuth: percent-encoding, `application/x-www-form-urlencoded`
//! bodies and queries, and splitting `http://host:port/path?query`.

use std::collections::BTreeMap;

/// Percent-encode everything but RFC 3986's unreserved characters.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decode percent-escapes and `+` (a space in form bodies); invalid escapes stay as written.
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `k=v&k=v`, each part percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    parts.join("&")
}

/// Parse `k=v&k=v`; a repeated key keeps its last value.
pub fn parse_form(text: &str) -> BTreeMap<String, String> {
    text.split('&')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(part), String::new()),
        })
        .collect()
}

/// An absolute `http://` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    /// The path and the query, as sent in a request line.
    pub target: String,
}

/// Split `http://host[:port][/path][?query]`; `None` for anything else.
pub fn parse(url: &str) -> Option<Url> {
    let rest = url.strip_prefix("http://")?;
    let (authority, target) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], rest[at..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, port.parse().ok()?),
        None => (authority, 80),
    };
    let target = if target.starts_with('?') {
        format!("/{target}")
    } else {
        target
    };
    Some(Url {
        host: host.to_string(),
        port,
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_urls_round_trip() {
        let body = form(&[
            ("redirect_uri", "http://daemon:7001/callback"),
            ("a b", "c+d"),
        ]);
        assert_eq!(
            body,
            "redirect_uri=http%3A%2F%2Fdaemon%3A7001%2Fcallback&a%20b=c%2Bd"
        );
        let back = parse_form(&body);
        assert_eq!(back["redirect_uri"], "http://daemon:7001/callback");
        assert_eq!(back["a b"], "c+d");
        let url = parse("http://oauth:9000/authorize?x=1").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.target.as_str()),
            ("oauth", 9000, "/authorize?x=1")
        );
        assert_eq!(parse("http://mcp").unwrap().target, "/");
        assert!(parse("https://mcp/").is_none());
    }
}
