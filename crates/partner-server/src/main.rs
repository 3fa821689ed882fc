//! `partner-server`: runs the Partner Portal API, or applies its migrations.

#![cfg_attr(test, allow(clippy::expect_used, clippy::indexing_slicing))]

use clap::{Parser, Subcommand};
use partner_server::config::{Config, LogFormat, Role};
use partner_server::demo;
use partner_server::startup::{Application, Migrations, prepare_database};

/// Partner Portal API server. Settings come from the environment (a `.env` file in the working
/// directory is read when present); see the README for the variables.
#[derive(Debug, Parser)]
#[command(name = "partner-server", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the API, the public catalog and the webhook workers.
    Serve {
        /// Do not apply pending migrations at start.
        #[arg(long)]
        no_migrate: bool,
        /// `api` runs no delivery worker; `worker` serves only /healthz and /readyz.
        #[arg(long, value_enum, default_value_t = Role::All)]
        role: Role,
    },
    /// Apply pending migrations (creating the database when missing), then exit.
    Migrate,
    /// `serve` on a demo data set (created once), printing a token and example requests.
    Demo,
    /// Write the OpenAPI 3.1 documents (`partner.json`, `internal.json`) into a directory.
    Openapi {
        /// Where to write them.
        #[arg(long, default_value = "docs/openapi")]
        out: std::path::PathBuf,
    },
}

// glibc malloc showed up as a fifth of the CPU profile of the leads listing under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One readable line (with causes), whatever RUST_BACKTRACE says.
            eprintln!("partner-server: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Log lines go to standard output, as text or one JSON object a line, filtered by `RUST_LOG`
/// and by caps no `RUST_LOG` lifts (`partner_server::logging`).
fn init_logging(config: &Config) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let json = match config.log_format {
        Some(LogFormat::Json) => true,
        Some(LogFormat::Text) => false,
        None => !std::io::stdout().is_terminal(),
    };
    partner_server::logging::init(&config.log_filter, json).map_err(|e| anyhow::anyhow!(e))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    // Needs no configuration, database or environment.
    if let Command::Openapi { out } = &cli.command {
        return partner_server::openapi::write(out);
    }
    // The working directory's `.env` only: `dotenv()` would also search the parent directories.
    match dotenvy::from_path("./.env") {
        Ok(()) => {}
        Err(e) if e.not_found() => {}
        Err(e) => anyhow::bail!(".env: {e}"),
    }
    let mut config = Config::from_env()?;
    init_logging(&config)?;
    match cli.command {
        Command::Serve { no_migrate, role } => {
            config.role = role;
            let migrations = if no_migrate {
                Migrations::Skip
            } else {
                Migrations::Apply
            };
            let app = Application::build(&config, migrations).await?;
            if config.token_pepper.is_none() {
                tracing::warn!(
                    "PARTNER_TOKEN_PEPPER is unset: authenticated calls answer 503 api_keys_unavailable"
                );
            }
            tracing::info!(
                bind = %config.bind,
                port = app.port(),
                internal_port = app.internal_port(),
                metrics_port = app.metrics_port(),
                role = ?config.role,
                "listening"
            );
            app.run_until_stopped().await?;
        }
        Command::Migrate => prepare_database(&config, Migrations::Apply).await?,
        Command::Openapi { .. } => {}
        Command::Demo => {
            demo::prepare_config(&mut config);
            prepare_database(&config, Migrations::Apply).await?;
            let access = demo::seed(&config).await?;
            let app = Application::build(&config, Migrations::Skip).await?;
            println!("{}", demo::banner(&config, app.port(), &access));
            // For scripts (the conformance run): the port and both tokens, one `KEY=value` a line.
            if let Some(path) = std::env::var_os("PARTNER_DEMO_ACCESS_FILE") {
                demo::write_access_file(std::path::Path::new(&path), &config, app.port(), &access)?;
            }
            app.run_until_stopped().await?;
        }
    }
    Ok(())
}
