//! Permission ids and the operator reply grammar (MODEL.md §3.2): ids are 5 letters from a–k and
//! m–z, normalised the same way when stored and when looked up; a reply is the whole message
//! `yes <id>` or `no <id>`, case-insensitive.

/// The id alphabet: a–z without `l` (it reads like `1` and `I` in chat).
pub const ID_ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyz";

/// Length of a permission request id.
pub const ID_LEN: usize = 5;

/// A decision the operator can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    Allow,
    Deny,
}

impl Behavior {
    /// The wire value of `notifications/claude/channel/permission`'s `behavior`.
    pub fn wire(self) -> &'static str {
        match self {
            Behavior::Allow => "allow",
            Behavior::Deny => "deny",
        }
    }
}

/// The canonical form of a permission id, or `None` when it is not one: trimmed, lowercased,
/// exactly [`ID_LEN`] letters of [`ID_ALPHABET`].
pub fn normalize_id(raw: &str) -> Option<String> {
    let id = raw.trim().to_ascii_lowercase();
    let valid = id.len() == ID_LEN && id.bytes().all(|b| ID_ALPHABET.contains(&b));
    valid.then_some(id)
}

/// Parse an operator message as a reply: the whole message (surrounding blanks aside) must be
/// `yes <id>` or `no <id>`, any case, one or more spaces between.
pub fn parse_reply(message: &str) -> Option<(Behavior, String)> {
    let mut words = message.split_ascii_whitespace();
    let (verb, id) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let behavior = match verb.to_ascii_lowercase().as_str() {
        "yes" => Behavior::Allow,
        "no" => Behavior::Deny,
        _ => return None,
    };
    Some((behavior, normalize_id(id)?))
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_whole_messages_in_any_case() {
        assert_eq!(
            parse_reply("yes abcde"),
            Some((Behavior::Allow, "abcde".into()))
        );
        assert_eq!(
            parse_reply("  NO  AbCdE "),
            Some((Behavior::Deny, "abcde".into()))
        );
        assert_eq!(parse_reply("yes abcde please"), None);
        assert_eq!(parse_reply("sure, yes abcde"), None);
        assert_eq!(parse_reply("yes abcdl"), None, "l is not in the alphabet");
        assert_eq!(parse_reply("yes abcd"), None);
        assert_eq!(parse_reply("yse abcde"), None);
    }

    #[test]
    fn ids_are_normalised() {
        assert_eq!(normalize_id(" ABCDE\n").as_deref(), Some("abcde"));
        assert_eq!(normalize_id("abcdl"), None, "l is not in the alphabet");
    }
}
