//! Just enough URL handling for OAuth: percent-encoding, `application/x-www-form-urlencoded`
//! bodies and queries, and splitting `http://host:port/path?query`.

use std::collections::BTreeMap;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`) is escaped.
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encode everything but RFC 3986's unreserved characters (a space is `%20`, never `+`:
/// the daemon's traces and snapshots spell forms that way).
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, RESERVED).to_string()
}

/// Decode percent-escapes and `+` (a space in form bodies); invalid escapes stay as written.
pub fn decode(text: &str) -> String {
    percent_decode_str(&text.replace('+', " ")).decode_utf8_lossy().into_owned()
}

/// `k=v&k=v`, each part percent-encoded.
pub fn form(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    parts.join("&")
}

/// Parse `k=v&k=v` (`application/x-www-form-urlencoded`); a repeated key keeps its last value.
pub fn parse_form(text: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
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

    #[test]
    fn decoding_keeps_invalid_escapes_and_reads_plus_as_space() {
        assert_eq!(decode("a+b%2Bc%zz%4"), "a b+c%zz%4");
        assert_eq!(encode("é~ x"), "%C3%A9~%20x");
        let back = parse_form("a=1&&b&a=2");
        assert_eq!((back["a"].as_str(), back["b"].as_str(), back.len()), ("2", "", 2));
    }
}
