//! Gate rules (`--gate PATTERN=ROOM`), the path view they are matched against, and the
//! waiting-room link a refused shopper is sent to.
//!
//! A rule is matched against a *normalized* path, so that no spelling the origin may read as
//! the same path slips past the gate: percent-decoded once, `\` read as `/`, empty and `.`
//! segments dropped, `..` resolved, `;parameters` cut off a segment, ASCII letters compared
//! without case. Normalizing can only gate more paths than the origin serves under a rule,
//! never fewer. The request itself goes to the origin untouched.

use axum::http::{header, HeaderMap, Method};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use vestibule_shared::is_valid_room_slug;

/// Longest `return` path kept (longer ones become `/`).
pub const MAX_RETURN_LEN: usize = 2048;

/// One segment of a rule's pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// This exact segment (compared normalized).
    Literal(String),
    /// Any one segment.
    Any,
    /// Any one segment, which names the room.
    Room,
}

/// A parsed `--gate` rule: the paths starting with its segments need admission to a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRule {
    segments: Vec<Segment>,
    /// The room of `PATTERN=ROOM`; `None` when the pattern holds `{room}`.
    room: Option<String>,
}

impl GateRule {
    /// Parses `PATTERN=ROOM`, or a `PATTERN` with one `{room}` segment.
    ///
    /// # Errors
    /// A short reason: no leading `/`, no segment, a bad room slug, `=ROOM` missing or given
    /// beside `{room}`, two `{room}`, or `*`, `{`, `}` inside a literal segment.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (pattern, room) = match text.rsplit_once('=') {
            Some((pattern, room)) => (pattern, Some(room)),
            None => (text, None),
        };
        if !pattern.starts_with('/') {
            return Err("the pattern must start with /".into());
        }
        let mut segments = Vec::new();
        for raw in pattern.split('/').filter(|s| !s.is_empty()) {
            segments.push(match raw {
                "*" => Segment::Any,
                "{room}" => Segment::Room,
                literal if literal.contains(['*', '{', '}']) => {
                    return Err(format!(
                        "segment {literal:?}: * and {{room}} must be whole segments"
                    ))
                }
                literal => match normalize_path(&format!("/{literal}")).as_slice() {
                    [one] => Segment::Literal(one.clone()),
                    _ => return Err(format!("segment {literal:?} is not a path segment")),
                },
            });
        }
        if segments.is_empty() {
            return Err(
                "the pattern needs at least one segment (gating / would gate everything)".into(),
            );
        }
        let room_segments = segments.iter().filter(|s| **s == Segment::Room).count();
        match (room_segments, room) {
            (0, None) => Err("name the room: PATTERN=ROOM".into()),
            (0, Some(room)) if !is_valid_room_slug(room) => {
                Err(format!("{room:?} is not a room slug [a-z0-9-]{{1,64}}"))
            }
            (0, Some(room)) => Ok(Self {
                segments,
                room: Some(room.to_owned()),
            }),
            (1, None) => Ok(Self {
                segments,
                room: None,
            }),
            (1, Some(_)) => Err("with {room} in the pattern, leave out =ROOM".into()),
            _ => Err("at most one {room} segment".into()),
        }
    }

    /// The room named by `=ROOM`, if the rule has one.
    pub fn fixed_room(&self) -> Option<&str> {
        self.room.as_deref()
    }

    /// The room this rule gates `path` (normalized segments) for, if it matches: the rule's
    /// room, or the `{room}` segment of the path (which may name no configured room).
    pub fn room_for(&self, path: &[String]) -> Option<String> {
        if path.len() < self.segments.len() {
            return None;
        }
        let mut captured = None;
        for (segment, actual) in self.segments.iter().zip(path) {
            match segment {
                Segment::Literal(literal) if !names_segment(literal, actual) => return None,
                Segment::Literal(_) | Segment::Any => {}
                Segment::Room => captured = Some(actual.clone()),
            }
        }
        self.room.clone().or(captured)
    }

    /// The path this rule gates for `room` when it names one path only: its literal segments,
    /// `{room}` written as `room` (`/rooms/{room}/checkout` → `/rooms/main/checkout`); `None`
    /// for another room's rule or a pattern with `*`.
    pub fn path_for(&self, room: &str) -> Option<String> {
        if self.room.as_deref().is_some_and(|fixed| fixed != room) {
            return None;
        }
        let mut path = String::new();
        for segment in &self.segments {
            path.push('/');
            match segment {
                Segment::Literal(literal) => path.push_str(literal),
                Segment::Room => path.push_str(room),
                Segment::Any => return None,
            }
        }
        Some(path)
    }

    /// Whether the rule matches paths under `prefix` (e.g. the mount prefix).
    pub fn covers(&self, prefix: &str) -> bool {
        self.room_for(&normalize_path(&format!("{prefix}/x")))
            .is_some()
    }
}

/// Whether a rule's literal segment names the path's segment `actual`: the same, or the same
/// with a format suffix (`checkout.json` for `checkout`), which Rails (`(.:format)`) and Spring
/// MVC's suffix matching route to the same action. Gating a path the origin serves apart costs a
/// shopper a detour through the waiting room; leaving one open it serves the same lets shoppers
/// skip the line.
fn names_segment(literal: &str, actual: &str) -> bool {
    actual
        .strip_prefix(literal)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The room the first matching rule gates `raw_path` for (see the module docs for how the path
/// is read).
///
/// A path is read two ways when it has escapes: decoded, then split on `/` (an origin that
/// decodes before routing), and split first, then each segment decoded (an origin that routes
/// on the raw path: Express's `/drops/:id/buy`, Go's `{id}`, where `a%2Fb` is one segment).
/// A rule that matches either reading gates it: otherwise `/drops/a%2Fb/buy` would pass a
/// `/drops/*/buy` rule (four segments once decoded) and reach an origin that reads three.
pub fn gated_room(rules: &[GateRule], raw_path: &str) -> Option<String> {
    let path = normalize_path(raw_path);
    rules
        .iter()
        .find_map(|rule| rule.room_for(&path))
        .or_else(|| {
            let by_raw_segments = raw_path
                .contains('%')
                .then(|| normalize_raw_segments(raw_path))?;
            rules
                .iter()
                .find_map(|rule| rule.room_for(&by_raw_segments))
        })
}

/// The segments of `raw_path` split before decoding (an escaped `/` stays in its segment), each
/// then read as [`normalize_path`] reads one.
fn normalize_raw_segments(raw_path: &str) -> Vec<String> {
    read_segments(
        raw_path
            .split(['/', '\\'])
            .map(|raw| percent_decode_str(raw).decode_utf8_lossy()),
    )
}

/// The segments of `raw_path` as an origin might read it: percent-decoded once, `\` as `/`,
/// empty and `.` segments dropped, `..` resolved, `;params` cut, ASCII lowercase.
pub fn normalize_path(raw_path: &str) -> Vec<String> {
    let decoded = percent_decode_str(raw_path).decode_utf8_lossy();
    read_segments(decoded.split(['/', '\\']).map(std::borrow::Cow::Borrowed))
}

/// Path segments as a router reads them: `;params` cut, empty and `.` dropped, `..` resolved,
/// ASCII lowercase.
fn read_segments<'a>(segments: impl Iterator<Item = std::borrow::Cow<'a, str>>) -> Vec<String> {
    let mut read: Vec<String> = Vec::new();
    for segment in segments {
        match segment.split(';').next().unwrap_or_default() {
            "" | "." => {}
            ".." => {
                read.pop();
            }
            other => read.push(other.to_ascii_lowercase()),
        }
    }
    read
}

/// Whether `raw_path` can mean another path to some origin than to the gate: a dot segment
/// (`.`/`..`, in any encoding, also before `;params` or between `\`), a segment that an origin
/// may trim (ending in `.`, or starting or ending with white space: IIS drops trailing dots and
/// spaces, Spring's path matching trimmed spaces — CVE-2016-5007), a control character once
/// decoded (`%00`, `%09`), escapes that do not decode to UTF-8 (`%C0%AF`, an overlong `/` that
/// old decoders read as one; Latin-1 bytes that decoders read differently), or an escape left
/// after one decoding (`%252e`, `%252f`: an origin that decodes twice would see `.`/`/`). Such
/// paths are refused before any rule is checked, so the gate and the origin can never disagree
/// on which path was asked (the class of `/checkout/..%2fx`, read as `/x` by one side and as
/// `/checkout/…` by the other, and of `/checkout.` or `/checkout%20`, read as `/checkout` by an
/// origin that trims). Browsers resolve dot segments before sending, so no page asks for one.
pub fn is_ambiguous_path(raw_path: &str) -> bool {
    if !raw_path.contains('%') {
        // Nothing escaped (nearly every request): the path reads as it is, with no decoded and
        // lowercased copy to make.
        return raw_path.chars().any(char::is_control) || has_unclear_segment(raw_path);
    }
    let bytes: std::borrow::Cow<'_, [u8]> = percent_decode_str(raw_path).into();
    let Ok(decoded) = std::str::from_utf8(&bytes) else {
        return true;
    };
    if decoded.chars().any(char::is_control) {
        return true;
    }
    let lower = decoded.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c", "%25", "%00"]
        .iter()
        .any(|escape| lower.contains(escape))
    {
        return true;
    }
    has_unclear_segment(decoded)
}

/// Whether a segment of `path` (split at `/` and `\`, each read up to its first `;`) is a dot
/// segment or one an origin may trim: ending in `.` (so `.` and `..` too), or starting or ending
/// with white space.
fn has_unclear_segment(path: &str) -> bool {
    path.split(['/', '\\']).any(|segment| {
        let segment = segment.split(';').next().unwrap_or_default();
        segment.ends_with('.')
            || segment.starts_with(char::is_whitespace)
            || segment.ends_with(char::is_whitespace)
    })
}

/// `candidate` when it is a clean same-origin path, else `/` (no open redirect, no detour).
///
/// Refused: anything not starting with `/` (`https://…`, `javascript:…`, `evil.com`),
/// protocol-relative `//host`, `/\host` and any other `\` (browsers read `\` as `/`), control
/// characters (browsers drop tabs and newlines, so `/\t/host` would become `//host`), paths
/// longer than [`MAX_RETURN_LEN`], and a path part (before `?` or `#`) that escapes a `/`, a `\`
/// or a control character (`%2F%2F`, `%5C`, `%09`, `%0a`, `%0b`, `%0d`: a decoding origin or
/// proxy reads another path, or the gate refuses it as ambiguous) or that
/// [`is_ambiguous_path`] refuses (dot segments, trimmed segments).
pub fn safe_return_path(candidate: &str) -> &str {
    let path = candidate.split(['?', '#']).next().unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    let safe = candidate.starts_with('/')
        && !candidate.starts_with("//")
        && !candidate.contains('\\')
        && !candidate.chars().any(char::is_control)
        && candidate.len() <= MAX_RETURN_LEN
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && !is_ambiguous_path(path);
    if safe {
        candidate
    } else {
        "/"
    }
}

/// Characters left as they are in a query value: RFC 3986 unreserved.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The waiting room of `room` under the mount `prefix`, coming back to `return_to` once
/// admitted: `{prefix}?room=ROOM&return=<percent-encoded same-origin path>`.
pub fn join_url(prefix: &str, room: &str, return_to: &str) -> String {
    let room = utf8_percent_encode(room, QUERY_VALUE);
    let back = utf8_percent_encode(safe_return_path(return_to), QUERY_VALUE);
    format!("{prefix}?room={room}&return={back}")
}

/// Whether the request is a browser navigation: `GET`/`HEAD` whose `Accept` includes `text/html`.
pub fn is_navigation(method: &Method, headers: &HeaderMap) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|accept| accept.to_ascii_lowercase().contains("text/html"))
}

#[cfg(test)]
mod tests;
