//! The command line of the built binary: `-h` fits one screen and names the commands,
//! `--help` has the detail, the old invocations still work, and the generated tables of
//! docs/configuration.md are what the binary prints.

use std::path::Path;
use std::process::{Command, Output};

use vestibule::cli::DocsTable;

/// `vestibule ARGS`, with no `VESTIBULE_*` variable of the test's environment.
fn vestibule(args: &[&str]) -> Output {
    vestibule_with(args, &[])
}

/// `vestibule ARGS` with the environment variables `env` (and no other `VESTIBULE_*` one).
fn vestibule_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vestibule"));
    command.args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("VESTIBULE_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command.output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8")
}

#[test]
fn short_help_fits_one_screen_and_names_the_commands() {
    for args in [&["-h"][..], &["serve", "-h"], &["demo", "-h"]] {
        let output = vestibule(args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        let help = stdout(&output);
        let lines: Vec<&str> = help.lines().collect();
        assert!(
            lines.len() <= 60,
            "{args:?}: {} lines:\n{help}",
            lines.len()
        );
        for line in &lines {
            let width = line.chars().count();
            assert!(
                width <= 100,
                "{args:?}: a line of {width} characters: {line}"
            );
        }
        assert!(help.contains("--bind <ADDR>"), "{help}");
        assert!(!help.contains("[env:"), "env vars are for --help:\n{help}");
    }
    let help = stdout(&vestibule(&["-h"]));
    for command in ["serve", "demo", "verify-draw"] {
        assert!(
            help.lines()
                .any(|line| line.trim_start().starts_with(command)),
            "{command} in\n{help}"
        );
    }
    assert!(
        !help.contains("docs"),
        "the docs command is hidden:\n{help}"
    );
}

#[test]
fn long_help_has_every_flag_with_its_env_var_and_default() {
    let help = stdout(&vestibule(&["--help"]));
    for needle in [
        "--bind <ADDR>",
        "[env: VESTIBULE_BIND=]",
        "[default: 127.0.0.1:8080]",
        "Limits and timeouts:",
        "--scheduler-nice <NICE>",
        "--previous-signing-key-file <FILE>",
        "verify-draw",
    ] {
        assert!(help.contains(needle), "{needle} in\n{help}");
    }
    assert!(
        help.lines().all(|line| line.chars().count() <= 100),
        "{help}"
    );
    let demo = stdout(&vestibule(&["demo", "--help"]));
    assert!(
        demo.starts_with("Run the server with a room `demo`"),
        "{demo}"
    );
    assert!(
        demo.contains("[default: demo]"),
        "the demo's own defaults:\n{demo}"
    );
    let verify = stdout(&vestibule(&["verify-draw", "--help"]));
    assert!(
        verify.contains("Usage: vestibule verify-draw [OPTIONS] <URL|FILE>"),
        "{verify}"
    );
}

#[test]
fn commands_keep_their_exit_codes() {
    // A flag clap refuses: 2, as before. Flags before a command: refused too.
    assert_eq!(vestibule(&["--tick-ms", "x"]).status.code(), Some(2));
    assert_eq!(
        vestibule(&["--tick-ms", "50", "demo"]).status.code(),
        Some(2)
    );
    // verify-draw of a file that cannot be read: 2 (docs/DESIGN.md); a server's environment
    // variable, even one that does not parse, is none of its business.
    let output = vestibule_with(
        &["verify-draw", "no-such-draw.json"],
        &[("VESTIBULE_BIND", "not an address")],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).starts_with("verify-draw: cannot read"),
        "{output:?}"
    );
    // The server's flags still read their environment twins, with or without `serve`.
    for args in [&[][..], &["serve"]] {
        let output = vestibule_with(args, &[("VESTIBULE_TICK_MS", "0")]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("--tick-ms"));
    }
    // An invalid configuration is refused before serving, with exit code 2, with or without
    // `serve`.
    for args in [&["--rooms", "Main"][..], &["serve", "--rooms", "Main"]] {
        let output = vestibule(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("--rooms"));
    }
}

#[test]
fn the_generated_tables_of_the_docs_are_what_the_binary_prints() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let doc = std::fs::read_to_string(&path).expect("docs/configuration.md");
    for (table, name) in [
        (DocsTable::Flags, "flags"),
        (DocsTable::Settings, "settings"),
    ] {
        let (begin, end) = vestibule::docs::markers(table);
        let committed = doc
            .split_once(begin)
            .and_then(|(_, rest)| rest.split_once(end))
            .map(|(inside, _)| inside.trim())
            .unwrap_or_else(|| panic!("docs/configuration.md lacks {begin} … {end}"));
        let output = vestibule(&["docs", name]);
        assert!(output.status.success(), "{output:?}");
        let printed = stdout(&output);
        assert!(
            committed == printed.trim(),
            "the {name} table of docs/configuration.md differs from `vestibule docs {name}`: \
             regenerate it with scripts/docs-tables.sh (and commit the result)"
        );
    }
}
