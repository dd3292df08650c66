//! `kandev`: the Kandev backend. `kandev serve` (the default) runs the operator API.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use kandev_backend::app;
use kandev_backend::config::{CONFIG_FILE_VAR, Config};

const CONFIG_HELP: &str = "\
CONFIGURATION (layers: built-in defaults < kandev.toml (--config / KANDEV_CONFIG) < KANDEV_* env)

  key                          env var                                default
  profile                      KANDEV_PROFILE                         dev    (dev | prod | e2e)
  listen                       KANDEV_LISTEN                          127.0.0.1:8080
  database_url                 KANDEV_DATABASE_URL                    sqlite://data/kandev.db (created on first start, WAL)
  profiles_file                KANDEV_PROFILES_FILE                   ./profiles.yaml if present, else the built-in copy
  notifications.clarification_requested
                               KANDEV_NOTIFICATIONS__CLARIFICATION_REQUESTED  true
  notifications.turn_finished  KANDEV_NOTIFICATIONS__TURN_FINISHED    false
  executor.kind                KANDEV_EXECUTOR__KIND                  local  (local | remote)
  executor.agentctl            KANDEV_EXECUTOR__AGENTCTL              the agentctl beside kandev (local)
  executor.url, executor.token KANDEV_EXECUTOR__URL, KANDEV_EXECUTOR__TOKEN  (remote: ws://host:port, bearer token)
  agents.<id>.command          program and arguments, e.g. [\"claude-agent-acp\"]
  agents.<id>.env              extra environment of the agent process
  agents.<id>.cwd              working directory of the agent process
  agents.<id>.permission_policy  allow_once | allow_always | reject_once | cancel
  agents.<id>.mcp_servers.<name>
                               the agent's own MCP servers, passed in session/new beside
                               kandev's (name `kandev` is taken): type = \"stdio\" with
                               command = [program, args...] and env = {...}, or
                               type = \"http\" with url and headers = {...} (the agent
                               must accept HTTP MCP servers)
  The default agent `mock` runs the mock-agent beside kandev with `--scenario demo`.
  A double underscore in an env var nests: KANDEV_AGENTS__MOCK__CWD=/tmp.

OTHER ENVIRONMENT
  KANDEV_FEATURES_ACP_ELICITATION  true|false: forces features.acpElicitation and locks
                                   the Settings toggle (PATCH answers 409).
  KANDEV_ELICITATION_ANSWER_TIMEOUT, KANDEV_ACP_IDLE_TIMEOUT
                                   read by agentctl, which the local executor starts with
                                   kandev's environment (defaults 55m and 1h).
  RUST_LOG                         log filter (default info).

A bad value stops start-up with one line naming the key, exit code 2.
Once listening, kandev prints KANDEV_LISTENING=<addr> on stdout.";

/// The Kandev backend: operator HTTP/WS API, SQLite store, sessions, clarifications.
#[derive(Debug, Parser)]
#[command(name = "kandev", version, about, after_long_help = CONFIG_HELP, after_help = CONFIG_HELP)]
struct Cli {
    /// Configuration file (TOML).
    #[arg(long, global = true, env = CONFIG_FILE_VAR, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the operator API (the default).
    Serve,
}

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
    }
}

fn serve(config_file: Option<PathBuf>) {
    let fail = |err: app::StartError| -> ! {
        eprintln!("kandev: {err}");
        std::process::exit(err.exit_code());
    };
    let config = Config::load(config_file.as_deref(), std::env::vars())
        .unwrap_or_else(|err| fail(err.into()));
    let cwd = std::env::current_dir().unwrap_or_default();
    let profiles = app::prepare(&config, &cwd, &kandev_flags::ProcessEnv)
        .unwrap_or_else(|err| fail(err.into()));
    let runtime = tokio::runtime::Runtime::new()
        .unwrap_or_else(|err| fail(app::StartError::Other(format!("cannot start tokio: {err}"))));
    if let Err(err) = runtime.block_on(app::serve(config, profiles)) {
        fail(err);
    }
}
