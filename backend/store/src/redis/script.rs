//! The contract between the Redis store and its Lua scripts.
//!
//! Each script is a [`ScriptSpec`]: its KEYS (room keys by their [`Key`]) and its ARGV, by name
//! and in order, declared once here. The script's source is made of three parts: Lua locals
//! binding those names (`local room, queue = KEYS[1], KEYS[2]`, generated from the spec), the
//! shared [`PRELUDE`], and the script's own file, whose header names the same KEYS and ARGV
//! (`-- KEYS: …`, `-- ARGV: …`; a test checks they match the spec). A call is built with
//! [`Call`], which takes the keys from the spec and each argument by its name.
//!
//! Every script that reads or writes a room's data first checks that the room's document is
//! live at the caller's generation (the prelude's `refusal`): a call for another generation
//! changes nothing and answers the error `ROOM_GONE <slug>`, a room whose document is missing
//! `ROOM_LOST <slug>`. [`script_error`] turns both into the store's errors.

use redis::{FromRedisValue, RedisResult, Script, ToRedisArgs};

use super::keys::{Key, RoomKeys};
use super::RedisConnection;
use crate::StoreError;

/// Lua shared by every script, after the bindings of its KEYS and ARGV.
pub(super) const PRELUDE: &str = r#"
-- refusal(doc, generation): nil when the room document `doc` is live at `generation` (a string);
-- else the error reply to answer at once, before anything is written: `ROOM_LOST <slug>` when
-- there is no document (the store lost it), `ROOM_GONE <slug>` when it is deleted or another
-- generation is live.
local function refusal(doc, generation)
  local found = redis.call('HMGET', doc, 'gen', 'state')
  local slug = string.match(doc, '{(.*)}') or doc
  if not found[1] then
    return redis.error_reply('ROOM_LOST ' .. slug)
  end
  if found[1] ~= generation or found[2] ~= 'live' then
    return redis.error_reply('ROOM_GONE ' .. slug)
  end
  return nil
end
"#;

/// What a script takes and where its source is.
#[derive(Debug)]
pub(super) struct ScriptSpec {
    /// The file's name under `lua/`, without `.lua`.
    pub name: &'static str,
    /// The file's source.
    pub body: &'static str,
    /// Its KEYS in order.
    pub keys: &'static [Key],
    /// Its ARGV in order (before any repeated items).
    pub args: &'static [&'static str],
    /// The fields of one repeated item after `args` (a batch of joins, a list of ids): the
    /// script gets `EACH` (the ARGV index of the first item), `EACH_WIDTH`, `ITEMS` (their
    /// count) and `item(n, into)`, which sets these fields of the table `into` to item `n`'s.
    pub each: &'static [&'static str],
}

impl ScriptSpec {
    /// The Lua that binds the spec's names, then the prelude, then the body.
    pub(super) fn source(&self) -> String {
        let mut lua = String::new();
        if !self.keys.is_empty() {
            let names: Vec<&str> = self.keys.iter().map(|key| key.name()).collect();
            let slots: Vec<String> = (1..=self.keys.len())
                .map(|i| format!("KEYS[{i}]"))
                .collect();
            lua.push_str(&format!(
                "local {} = {}\n",
                names.join(", "),
                slots.join(", ")
            ));
        }
        if !self.args.is_empty() {
            let slots: Vec<String> = (1..=self.args.len())
                .map(|i| format!("ARGV[{i}]"))
                .collect();
            lua.push_str(&format!(
                "local {} = {}\n",
                self.args.join(", "),
                slots.join(", ")
            ));
        }
        if !self.each.is_empty() {
            let first = self.args.len() + 1;
            let width = self.each.len();
            lua.push_str(&format!(
                "local EACH, EACH_WIDTH = {first}, {width}\nlocal ITEMS = (#ARGV - EACH + 1) / EACH_WIDTH\n"
            ));
            let fields: Vec<String> = self
                .each
                .iter()
                .map(|name| format!("into.{name}"))
                .collect();
            let slots: Vec<String> = (0..width).map(|i| format!("ARGV[base + {i}]")).collect();
            lua.push_str(&format!(
                "local function item(n, into)\n  local base = EACH + (n - 1) * EACH_WIDTH\n  {} = {}\n  return into\nend\n",
                fields.join(", "),
                slots.join(", ")
            ));
        }
        lua.push_str(PRELUDE);
        lua.push_str(self.body);
        lua
    }

    /// The script to run.
    pub(super) fn load(&'static self) -> Loaded {
        let source = self.source();
        Loaded {
            spec: self,
            script: Script::new(&source),
            source,
        }
    }
}

/// A script ready to be called.
#[derive(Clone)]
pub(super) struct Loaded {
    pub spec: &'static ScriptSpec,
    /// The script's SHA-1 (`get_hash`).
    pub script: Script,
    /// The whole source: bindings, prelude, body.
    pub source: String,
}

impl Loaded {
    /// A call of this script on `keys`, its KEYS already in place.
    pub(super) fn call<'a>(&'a self, keys: &RoomKeys) -> Call<'a> {
        let invocation = Invocation {
            source: &self.source,
            hash: self.script.get_hash(),
            keys: self.spec.keys.iter().map(|key| keys.of(*key)).collect(),
            args: Vec::new(),
        };
        Call {
            spec: self.spec,
            invocation,
            next: 0,
        }
    }
}

/// One call of a script being built: its arguments go in by name, in the spec's order.
pub(super) struct Call<'a> {
    spec: &'static ScriptSpec,
    pub(super) invocation: Invocation<'a>,
    next: usize,
}

/// A script's call as Redis gets it: `EVALSHA`, and `EVAL` with the source when the server does
/// not hold the script yet (after a start, a restart or `SCRIPT FLUSH`), which also caches it
/// there. Never `SCRIPT LOAD`: a cluster client sends that to every node it is connected to and
/// waits for all of them, so one hung node anywhere in the cluster would make the first call of a
/// script wait the whole store timeout, although the call needs only its slot's master.
pub(super) struct Invocation<'a> {
    source: &'a str,
    hash: &'a str,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

impl Invocation<'_> {
    fn arg<T: ToRedisArgs>(&mut self, value: T) {
        self.args.extend(value.to_redis_args());
    }

    /// `verb` (`EVALSHA` or `EVAL`) with `script` (the hash or the source), the keys and the
    /// arguments: routed on a cluster by the first key, as every key of a call is in one slot.
    fn command(&self, verb: &str, script: &str) -> redis::Cmd {
        let mut command = redis::cmd(verb);
        command.arg(script).arg(self.keys.len());
        for key in &self.keys {
            command.arg(key);
        }
        for arg in &self.args {
            command.arg(arg.as_slice());
        }
        command
    }

    /// Runs the call: `EVALSHA`, then `EVAL` if the server answers `NOSCRIPT`.
    pub(super) async fn invoke_async<T: FromRedisValue>(
        &self,
        connection: &mut RedisConnection,
    ) -> RedisResult<T> {
        match self
            .command("EVALSHA", self.hash)
            .query_async(connection)
            .await
        {
            Err(error)
                if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                self.command("EVAL", self.source)
                    .query_async(connection)
                    .await
            }
            answer => answer,
        }
    }
}

impl Call<'_> {
    /// The next argument, which the spec names `name`.
    ///
    /// # Panics
    /// When `name` is not the spec's next argument: a call built against another contract than
    /// the script's is a bug, caught by every test that makes the call.
    pub(super) fn arg<T: ToRedisArgs>(&mut self, name: &str, value: T) -> &mut Self {
        assert_eq!(
            self.spec.args.get(self.next).copied(),
            Some(name),
            "{}.lua takes {:?} as argument {}",
            self.spec.name,
            self.spec.args.get(self.next),
            self.next + 1
        );
        self.next += 1;
        self.invocation.arg(value);
        self
    }

    /// One repeated item: one value per name of the spec's `each`, in that order.
    ///
    /// # Panics
    /// When the spec's own arguments are not all given yet, or `values` has another length than
    /// `each`.
    pub(super) fn item<T: ToRedisArgs>(&mut self, values: &[T]) -> &mut Self {
        assert_eq!(
            self.next,
            self.spec.args.len(),
            "{}.lua: an item before its arguments",
            self.spec.name
        );
        assert_eq!(
            values.len(),
            self.spec.each.len(),
            "{}.lua: item width",
            self.spec.name
        );
        for value in values {
            self.invocation.arg(value);
        }
        self
    }
}

/// The store error a script's error reply stands for: `ROOM_GONE` and `ROOM_LOST` (the
/// prelude's refusals, nothing written; their detail is the slug); `None` for any other error.
pub(super) fn script_error(error: &redis::RedisError) -> Option<StoreError> {
    let slug = || error.detail().unwrap_or_default().trim().to_owned();
    match error.code() {
        Some("ROOM_GONE") => Some(StoreError::RoomGone(slug())),
        Some("ROOM_LOST") => Some(StoreError::RoomLost(slug())),
        _ => None,
    }
}

/// Every script of the store.
pub(super) static SPECS: &[&ScriptSpec] = &[
    &super::specs::CREATE,
    &super::specs::CHANGE,
    &super::specs::WRITE_BACK,
    &super::specs::DELETE,
    &super::specs::LEASE,
    &super::specs::RELEASE_LEASE,
    &super::specs::ADMIT,
    &super::specs::JOIN,
    &super::specs::HEAR,
    &super::specs::SSE_REFRESH,
    &super::specs::LEAVE,
    &super::specs::PARK,
    &super::specs::TOKEN,
    &super::specs::DRAW,
    &super::specs::DRAW_SEED,
    &super::specs::DRAW_MIX,
    &super::specs::LOTTERY_FILE,
    &super::specs::WAITERS,
    &super::specs::ROOM_SECRET,
    &super::specs::FIGURES,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a header line `-- <label>: a b c` gives.
    fn header(spec: &ScriptSpec, label: &str) -> Vec<String> {
        let prefix = format!("-- {label}:");
        spec.body
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{}.lua has no `{prefix}` line", spec.name))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_script_header_names_exactly_its_spec_keys_and_arguments_in_order() {
        for spec in SPECS {
            let keys: Vec<String> = spec.keys.iter().map(|key| key.name().to_owned()).collect();
            assert_eq!(header(spec, "KEYS"), keys, "{}.lua KEYS", spec.name);
            let args: Vec<String> = spec.args.iter().map(|arg| (*arg).to_owned()).collect();
            assert_eq!(header(spec, "ARGV"), args, "{}.lua ARGV", spec.name);
            let each: Vec<String> = spec.each.iter().map(|arg| (*arg).to_owned()).collect();
            if each.is_empty() {
                assert!(
                    !spec.body.contains("-- EACH:"),
                    "{}.lua names items its spec has not",
                    spec.name
                );
            } else {
                assert_eq!(header(spec, "EACH"), each, "{}.lua EACH", spec.name);
            }
        }
    }

    #[test]
    fn no_script_names_a_key_by_its_position() {
        for spec in SPECS {
            assert!(
                !spec.body.contains("KEYS["),
                "{}.lua reads KEYS by position",
                spec.name
            );
        }
    }

    #[test]
    fn every_script_that_touches_a_generation_checks_the_room_first() {
        for spec in SPECS {
            let of_generation = spec.keys.iter().any(|key| key.of_generation());
            let checks = spec.body.contains("refusal(room, generation)");
            if of_generation && spec.name != "release_lease" {
                assert!(checks, "{}.lua does not check the room", spec.name);
            }
        }
    }
}
