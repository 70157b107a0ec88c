//! The command line: `vestibule [serve] [FLAGS]`, `vestibule demo [FLAGS]`, `vestibule
//! verify-draw URL|FILE [--tag TAG]`, and the hidden `vestibule docs flags|settings`.
//!
//! `vestibule` with flags and no command serves, as it always did; `serve` says so explicitly.
//! The help comes in two sizes: `-h` fits one screen (one line per flag, the limits, timeouts
//! and tuning sections and every env var and default left out), `--help` has everything
//! (docs/configuration.md, "Flags").

use std::ffi::OsString;

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

use crate::config::{heading, Config};
use crate::verify_draw::VerifyDraw;

/// Width the long help is wrapped to (the flags' long help is indented by 10 more).
const LONG_HELP_WIDTH: usize = 100;
/// How far clap indents a flag's long help.
const LONG_HELP_INDENT: usize = 10;

/// Vestibule: a virtual waiting room for flash sales.
///
/// With no command it serves, as `vestibule serve`. Every flag has a `VESTIBULE_*` environment
/// twin, and the defaults need no setup.
#[derive(Debug, Parser)]
#[command(
    name = "vestibule",
    version,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// What to run; none = serve.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The server's flags, for `vestibule [FLAGS]` without a command.
    #[command(flatten)]
    pub config: Config,
}

/// The commands of the binary.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default: `vestibule [OPTIONS]` does the same).
    Serve(Config),
    /// Run the server with a room `demo` that synthetic shoppers join.
    ///
    /// Memory only, with the demo room's settings, unless the command line says otherwise: the
    /// defaults below are the demo's (environment variables do not change them), and `--rooms`
    /// adds rooms beside `demo`. The page is at `/?room=demo`, the console at `/console/`.
    Demo(Config),
    /// Recompute a room's published draw; exit 0 = it matches.
    ///
    /// From its published seed and tags: exit 0 = it matches, 1 = it does not, 2 = the input
    /// cannot be read or lacks pages, 3 = it matches but `--tag` is not in it (docs/DESIGN.md,
    /// "Scheduled opening and the draw"). Fetches plain `http://` only: save an https answer
    /// (every page) with curl and pass the file.
    VerifyDraw(VerifyDraw),
    /// Print a Markdown table of docs/configuration.md (scripts/docs-tables.sh).
    #[command(hide = true)]
    Docs {
        /// Which table.
        #[arg(value_enum)]
        table: DocsTable,
    },
}

/// The generated tables of docs/configuration.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DocsTable {
    /// Every flag: name, env var, default, one-line help.
    Flags,
    /// Every room setting: JSON name, type, default, meaning.
    Settings,
}

/// The command line, parsed: the command and its matches (the demo reads which flags were
/// given).
#[derive(Debug)]
pub struct Parsed {
    /// The typed command line.
    pub cli: Cli,
    /// What clap matched, for [`ArgMatches::value_source`].
    pub matches: ArgMatches,
}

/// Parses the process's arguments; prints the help, the version or the error and exits when
/// that is what they ask for (exit code 2 on an error, as clap does).
pub fn parse() -> Parsed {
    parse_from(std::env::args_os())
}

/// [`parse`] of the given arguments (the first is the binary's name).
pub fn parse_from(args: impl IntoIterator<Item = impl Into<OsString>>) -> Parsed {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut command = command_for(&args);
    let matches = command
        .try_get_matches_from_mut(args)
        .unwrap_or_else(|error| error.exit());
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => Parsed { cli, matches },
        Err(error) => error.format(&mut command).exit(),
    }
}

/// The binary's `clap::Command`: [`Cli`]'s derived command with what derive cannot say: the
/// demo's own defaults, the long help wrapped, `-h` limited to one screen, and the footers.
pub fn command() -> clap::Command {
    let cli = Cli::command();
    let long_help_only = cli
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && brief_leaves_out(arg))
        .count();
    let footer = format!(
        "{long_help_only} more flags (limits, timeouts, tuning, key rotation), env vars and defaults: --help"
    );
    let server = move |command: clap::Command| {
        command
            .mut_args(|arg| {
                let leave_out = brief_leaves_out(&arg);
                wrap_long_help(arg).hide_short_help(leave_out)
            })
            .after_help(footer.clone())
            .after_long_help("Every flag and room setting: docs/configuration.md.")
    };
    let cli = server(cli)
        .mut_subcommand("serve", &server)
        .mut_subcommand("demo", |demo| {
            server(demo)
                .mut_arg("data_dir", |arg| arg.default_value("none"))
                .mut_arg("rooms", |arg| arg.default_value(crate::demo::DEMO_ROOM))
                .mut_arg("admission_rate", |arg| {
                    arg.default_value(crate::demo::DEMO_RATE)
                })
                .mut_arg("token_ttl_secs", |arg| {
                    arg.default_value(crate::demo::DEMO_TTL_SECS)
                })
        })
        .mut_subcommand("verify-draw", |verify| verify.mut_args(wrap_long_help));
    wrap_about(cli)
}

/// The command `-h` is parsed with: [`command`] with env vars and defaults left to `--help`, so
/// that each flag takes one line.
pub fn short_help_command() -> clap::Command {
    fn brief(command: clap::Command) -> clap::Command {
        command
            .mut_args(|arg| {
                // (clap shows no default of a flag without a value, and refuses to hide one.)
                let takes_value = arg.get_action().takes_values();
                arg.hide_env(true).hide_default_value(takes_value)
            })
            .mut_subcommands(brief)
    }
    brief(command())
}

/// The command `args` are parsed with: [`short_help_command`] for `-h`, else [`command`]; and
/// when they start with a command (which must come first), without the environment twins of the
/// server's top-level flags, which are not read then: a server's `VESTIBULE_*` variable that
/// does not parse must not stop `vestibule verify-draw`.
fn command_for(args: &[OsString]) -> clap::Command {
    let command = if asks_for_short_help(args) {
        short_help_command()
    } else {
        command()
    };
    let names_a_command = args
        .get(1)
        .and_then(|first| first.to_str())
        .is_some_and(|first| command.find_subcommand(first).is_some());
    if names_a_command {
        command.mut_args(|arg| arg.env(None))
    } else {
        command
    }
}

/// Whether the arguments ask for `-h` (before any `--`): the help is the only thing that tells
/// `-h` from `--help` apart, so the short form is chosen before parsing.
fn asks_for_short_help(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "-h")
}

/// Whether `-h` leaves a flag to `--help`: the sections of [`heading::LONG_HELP_ONLY`], and the
/// flags marked `hide_short_help` where they are declared.
fn brief_leaves_out(arg: &clap::Arg) -> bool {
    arg.is_hide_short_help_set()
        || arg
            .get_help_heading()
            .is_some_and(|name| heading::LONG_HELP_ONLY.contains(&name))
}

/// Wraps a flag's long help (its whole doc comment) to fit [`LONG_HELP_WIDTH`] once indented.
fn wrap_long_help(arg: clap::Arg) -> clap::Arg {
    match arg.get_long_help().map(ToString::to_string) {
        Some(text) => arg.long_help(wrap(&text, LONG_HELP_WIDTH - LONG_HELP_INDENT)),
        None => arg,
    }
}

/// Wraps the long `about` of a command and of its subcommands.
fn wrap_about(command: clap::Command) -> clap::Command {
    let command = match command.get_long_about().map(ToString::to_string) {
        Some(text) => command.long_about(wrap(&text, LONG_HELP_WIDTH)),
        None => command,
    };
    command.mut_subcommands(wrap_about)
}

/// Greedy word wrap of each paragraph (paragraphs are separated by a blank line) to `width`
/// columns; a word longer than `width` gets a line of its own.
pub fn wrap(text: &str, width: usize) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            let mut lines: Vec<String> = Vec::new();
            let mut line = String::new();
            for word in paragraph.split_whitespace() {
                if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                    lines.push(std::mem::take(&mut line));
                }
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(word);
            }
            lines.push(line);
            lines.join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Parsed {
        let mut all = vec!["vestibule"];
        all.extend_from_slice(args);
        let command = command();
        let matches = command.try_get_matches_from(all).expect("parses");
        Parsed {
            cli: Cli::from_arg_matches(&matches).expect("typed"),
            matches,
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        command().debug_assert();
        short_help_command().debug_assert();
    }

    #[test]
    fn flags_alone_serve_as_before() {
        let parsed = parsed(&["--bind", "127.0.0.1:0", "--rooms", "a,b"]);
        assert!(parsed.cli.command.is_none());
        assert_eq!(parsed.cli.config.rooms, ["a", "b"]);
        assert_eq!(parsed.cli.config.bind.port(), 0);
    }

    #[test]
    fn serve_demo_and_verify_draw_are_commands() {
        let Some(Command::Serve(config)) = parsed(&["serve", "--tick-ms", "50"]).cli.command else {
            panic!("serve");
        };
        assert_eq!(config.tick_ms, 50);
        assert!(matches!(
            parsed(&["demo", "--bind", "127.0.0.1:0"]).cli.command,
            Some(Command::Demo(_))
        ));
        let Some(Command::VerifyDraw(args)) = parsed(&["verify-draw", "draw.json", "--tag", "t1"])
            .cli
            .command
        else {
            panic!("verify-draw");
        };
        assert_eq!(
            (args.source.as_str(), args.tag.as_deref()),
            ("draw.json", Some("t1"))
        );
        assert!(matches!(
            parsed(&["docs", "settings"]).cli.command,
            Some(Command::Docs {
                table: DocsTable::Settings
            })
        ));
    }

    #[test]
    fn a_command_reads_no_environment_twin_of_the_top_level_flags() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let with_command = command_for(&args(&["vestibule", "verify-draw", "x"]));
        assert!(with_command
            .get_arguments()
            .all(|arg| arg.get_env().is_none()));
        let demo = with_command.find_subcommand("demo").expect("demo");
        assert!(demo.get_arguments().any(|arg| arg.get_env().is_some()));
        let serving = command_for(&args(&["vestibule", "--bind", "127.0.0.1:0"]));
        assert!(serving.get_arguments().any(|arg| arg.get_env().is_some()));
    }

    #[test]
    fn flags_before_a_command_are_refused() {
        assert!(command()
            .try_get_matches_from(["vestibule", "--tick-ms", "50", "demo"])
            .is_err());
    }

    #[test]
    fn every_flag_has_a_known_heading_and_a_one_line_help() {
        let command = command();
        for arg in command
            .get_arguments()
            .filter(|arg| arg.get_long().is_some())
        {
            let long = arg.get_long().unwrap_or_default();
            if long == "help" || long == "version" {
                continue;
            }
            let heading = arg.get_help_heading().unwrap_or_default();
            assert!(
                heading::ALL.contains(&heading),
                "--{long}: heading {heading:?}"
            );
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                !help.is_empty() && !help.contains('\n') && help.chars().count() <= 70,
                "--{long}: one line of at most 70 characters: {help:?}"
            );
        }
    }

    #[test]
    fn only_a_short_help_flag_alone_asks_for_the_short_help() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(asks_for_short_help(&args(&["vestibule", "-h"])));
        assert!(asks_for_short_help(&args(&["vestibule", "demo", "-h"])));
        assert!(!asks_for_short_help(&args(&["vestibule", "--help"])));
        assert!(!asks_for_short_help(&args(&["vestibule", "--", "-h"])));
        assert!(!asks_for_short_help(&args(&["-h"])));
    }

    #[test]
    fn wrapping_keeps_paragraphs_and_words() {
        assert_eq!(wrap("aa bb cc\n\ndd", 5), "aa bb\ncc\n\ndd");
        assert_eq!(wrap("averylongword x", 4), "averylongword\nx");
    }
}
