//! The generated tables of docs/configuration.md (`vestibule docs flags|settings`): every flag
//! from the binary's `clap::Command`, every room setting from the OpenAPI document the server
//! serves, so the docs cannot drift from the program. `scripts/docs-tables.sh` writes them
//! between their markers, and `backend/tests/cli.rs` fails when the committed ones differ.

use clap::{ArgAction, CommandFactory as _, FromArgMatches as _};
use serde_json::Value;

use crate::cli::DocsTable;
use crate::Config;

/// The markers around a table in docs/configuration.md.
pub fn markers(table: DocsTable) -> (&'static str, &'static str) {
    match table {
        DocsTable::Flags => ("<!-- flags:begin -->", "<!-- flags:end -->"),
        DocsTable::Settings => ("<!-- settings:begin -->", "<!-- settings:end -->"),
    }
}

/// A table as Markdown, one row a line, ending with a newline.
pub fn table(table: DocsTable) -> String {
    match table {
        DocsTable::Flags => flags_table(&crate::cli::command()),
        DocsTable::Settings => settings_table(),
    }
}

/// Every visible flag of `command`, grouped by its `--help` heading (a bold row per heading):
/// the flag with its value, its environment variable, its default, its one-line help.
pub fn flags_table(command: &clap::Command) -> String {
    let flags: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|arg| arg.get_long().is_some() && !arg.is_hide_set())
        .filter(|arg| {
            !matches!(
                arg.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
        })
        .collect();
    let mut headings: Vec<&str> = Vec::new();
    for arg in &flags {
        let heading = arg.get_help_heading().unwrap_or("Options");
        if !headings.contains(&heading) {
            headings.push(heading);
        }
    }
    let mut out = String::from("| flag | env | default | meaning |\n|---|---|---|---|\n");
    for heading in headings {
        out.push_str(&format!("| **{heading}** | | | |\n"));
        for arg in flags
            .iter()
            .filter(|arg| arg.get_help_heading().unwrap_or("Options") == heading)
        {
            let mut flag = format!("--{}", arg.get_long().unwrap_or_default());
            if arg.get_action().takes_values() {
                for name in arg.get_value_names().unwrap_or_default() {
                    flag.push_str(&format!(" <{name}>"));
                }
            }
            let env = arg
                .get_env()
                .map(|name| format!("`{}`", name.to_string_lossy()))
                .unwrap_or_default();
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|value| value.to_string_lossy().into_owned())
                .collect();
            let default = if defaults.is_empty() {
                "unset".to_owned()
            } else {
                format!("`{}`", defaults.join(","))
            };
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            out.push_str(&format!(
                "| `{flag}` | {env} | {default} | {} |\n",
                cell(&help)
            ));
        }
    }
    out
}

/// Every room setting an operator changes (`PATCH /api/v1/admin/rooms/{room}`), from the
/// OpenAPI document: its JSON name; its type, unit and bounds (`RoomSettingsPatch`); its default
/// (a room made with every flag at its default, as `GET` shows it); and its meaning
/// (`RoomSettings`).
pub fn settings_table() -> String {
    let (_, openapi) = crate::http::documented_routes();
    let document = serde_json::to_value(&openapi).expect("the OpenAPI document is JSON");
    let schemas = &document["components"]["schemas"];
    let patch = schemas["RoomSettingsPatch"]["properties"]
        .as_object()
        .expect("RoomSettingsPatch has properties");
    let view = &schemas["RoomSettings"]["properties"];
    let defaults = serde_json::to_value(crate::http::admin::view(
        "main",
        default_config().default_settings(),
        Default::default(),
    ))
    .expect("settings are JSON");
    let mut out = String::from("| setting | type | default | meaning |\n|---|---|---|---|\n");
    for (name, property) in patch {
        let shown = &view[name];
        let kind = type_of(name, property, shown, schemas);
        let default = match &defaults[name] {
            Value::Null => "`null`".to_owned(),
            value => format!("`{value}`"),
        };
        let meaning = meaning(&description(shown, property, schemas));
        out.push_str(&format!(
            "| `{name}` | {} | {default} | {} |\n",
            cell(&kind),
            cell(&meaning)
        ));
    }
    out
}

/// A setting's description: the view's, else the patch's, else (a setting that is an object of
/// its own, such as `autoRate`) the description of the schema it refers to.
fn description(shown: &Value, property: &Value, schemas: &Value) -> String {
    let direct = [shown, property]
        .into_iter()
        .find_map(|value| value["description"].as_str().filter(|d| !d.is_empty()));
    if let Some(text) = direct {
        return text.to_owned();
    }
    let text = shown.to_string();
    let referred = text
        .split("#/components/schemas/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default();
    schemas[referred]["description"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The configuration with every flag at its default, whatever the environment says.
fn default_config() -> Config {
    let mut command = Config::command().mut_args(|arg| arg.env(None));
    let matches = command
        .try_get_matches_from_mut(["vestibule"])
        .expect("the defaults parse");
    Config::from_arg_matches(&matches).expect("the defaults are a configuration")
}

/// A setting's type: JSON type or enum, unit (from the name: `…Secs`, `…PerSec`), bounds, and
/// whether it may be null (in `GET`'s schema `shown`).
fn type_of(name: &str, property: &Value, shown: &Value, schemas: &Value) -> String {
    let reference = property["$ref"].as_str().or_else(|| {
        property["oneOf"]
            .as_array()?
            .iter()
            .find_map(|choice| choice["$ref"].as_str())
    });
    let mut kind = if let Some(reference) = reference {
        let target = &schemas[reference.rsplit('/').next().unwrap_or_default()];
        target["enum"]
            .as_array()
            .map(|values| {
                values
                    .iter()
                    .map(|value| format!("`{value}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            })
            .unwrap_or_else(|| "object".to_owned())
    } else {
        let base = json_types(property)
            .into_iter()
            .find(|kind| kind != "null")
            .unwrap_or_default();
        let unit = if name.ends_with("PerSec") {
            " (per second)"
        } else if name.ends_with("Secs") {
            " (seconds)"
        } else {
            ""
        };
        let mut kind = format!("{base}{unit}");
        if property["format"] == "date-time" {
            kind = "RFC 3339 time".to_owned();
        }
        if let (Some(min), Some(max)) = (property["minimum"].as_f64(), property["maximum"].as_f64())
        {
            kind.push_str(&format!(", {min}–{max}"));
        }
        if let Some(length) = property["maxLength"].as_u64() {
            kind.push_str(&format!(", ≤ {length} characters"));
        }
        kind
    };
    if json_types(shown).iter().any(|kind| kind == "null") || shown["oneOf"].is_array() {
        kind.push_str(", or `null`");
    }
    kind
}

/// The `type` of a schema, as a list (OpenAPI 3.1 allows one name or several).
fn json_types(schema: &Value) -> Vec<String> {
    match &schema["type"] {
        Value::String(kind) => vec![kind.clone()],
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(|kind| kind.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// A schema description as a table's meaning: one line, without its example, its rustdoc
/// links (for Rust readers) left out when in parentheses of their own, else as plain code.
fn meaning(description: &str) -> String {
    let mut text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(at) = text.find("Example:") {
        text.truncate(at);
    }
    while let Some(start) = text.find(" ([`") {
        match text[start..].find("`])") {
            Some(length) => text.replace_range(start..start + length + 3, ""),
            None => break,
        }
    }
    text.trim_end().replace("[`", "`").replace("`]", "`")
}

/// Text safe in a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_and_setting_has_a_row() {
        let flags = table(DocsTable::Flags);
        for flag in [
            "`--bind <ADDR>`",
            "`--gate <PATTERN=ROOM>`",
            "`--disable-admin`",
        ] {
            assert!(flags.contains(flag), "{flag} in\n{flags}");
        }
        assert!(flags.contains("| `VESTIBULE_BIND` | `127.0.0.1:8080` |"));
        let settings = table(DocsTable::Settings);
        assert!(
            settings
                .contains("| `admissionRatePerSec` | number (per second), 0–100000 | `175.0` |"),
            "{settings}"
        );
        assert!(settings.contains("| `queueingMethod` | `\"fifo\"` or `\"random\"` |"));
        assert!(!settings.contains("Example:"));
    }

    #[test]
    fn a_description_loses_its_example_and_links() {
        assert_eq!(
            meaning("Where ([`a::b`]); null = [`C`]. Example:\n`\"y\"`."),
            "Where; null = `C`."
        );
    }
}
