//! The `vestibule` binary: reads the command line (`vestibule::cli`), sets up tracing, runs the
//! application; or, as `vestibule verify-draw`, recomputes a published draw; or, as `vestibule
//! demo [flags]`, runs with a demo room that synthetic shoppers join (`vestibule::demo`); or, as
//! the hidden `vestibule docs flags|settings`, prints a table of docs/configuration.md.

use vestibule::cli::Command;
use vestibule::config::InvalidConfig;
use vestibule::Application;

/// mimalloc instead of glibc's malloc: every request allocates (hyper reserves an 8 KiB read
/// buffer per request, and glibc consolidates its fast bins on each such allocation), and the
/// allocator was a fifth of a poll's CPU (BENCHMARKS.md "The hot path").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let parsed = vestibule::cli::parse();
    let (config, demo) = match parsed.cli.command {
        // `vestibule verify-draw …` (docs/DESIGN.md "Scheduled opening and the draw"): no server.
        Some(Command::VerifyDraw(args)) => return vestibule::verify_draw::run(args).await,
        Some(Command::Docs { table }) => {
            print!("{}", vestibule::docs::table(table));
            return std::process::ExitCode::SUCCESS;
        }
        Some(Command::Demo(config)) => {
            let matches = parsed.matches.subcommand_matches("demo");
            let matches = matches.expect("the demo's matches");
            (vestibule::demo::configure(config, matches), true)
        }
        Some(Command::Serve(config)) => (config, false),
        None => (parsed.cli.config, false),
    };
    vestibule::telemetry::init_tracing();
    // `Application::build` validates the configuration first, before it touches anything.
    let application = match Application::build(config).await {
        Ok(application) => application,
        Err(error) => {
            if let Some(InvalidConfig(reason)) = error.downcast_ref() {
                eprintln!("vestibule: invalid configuration: {reason}");
                return std::process::ExitCode::from(2);
            }
            eprintln!("vestibule: cannot start: {error:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Tests and scripts read this line to find the port; keep its form.
    println!(
        "vestibule listening on http://{} (store: {})",
        application.local_addr(),
        application.store_kind()
    );
    if let Some(token) = application.generated_admin_token() {
        println!("admin token (generated, shown once): {token}");
    }
    if demo {
        let address = application.local_addr();
        println!(
            "demo: shoppers are joining room {room}: the page at http://{address}/?room={room}, \
             the console at http://{address}/console/",
            room = vestibule::demo::DEMO_ROOM
        );
        tokio::spawn(vestibule::demo::shoppers(
            address,
            application.shutdown_signal(),
        ));
    }
    match application.run_until_stopped().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("vestibule: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
