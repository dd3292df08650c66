//! `kandev`: the Kandev backend. `kandev serve` (the default) runs the operator API.

/// jemalloc rather than the system allocator: about 0.1 ms less per question at p50 with the
/// same peak RSS; mimalloc was as quick but held more (docs/decisions/0013-performance-floor.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use kandev_backend::app;
use kandev_backend::config::{CONFIG_FILE_VAR, Config, is_valid_operator_name};

const CONFIG_HELP: &str = "\
CONFIGURATION (layers: built-in defaults < kandev.toml (--config / KANDEV_CONFIG) < KANDEV_* env)

  key                          env var                                default
  profile                      KANDEV_PROFILE                         dev    (dev | prod | e2e)
  listen                       KANDEV_LISTEN                          127.0.0.1:8080
  database_url                 KANDEV_DATABASE_URL                    sqlite://data/kandev.db (created on first start, WAL)
                               or PostgreSQL: postgres://user:password@host:5432/kandev (the database must
                               exist; kandev migrates it). `kandev migrate-db --from sqlite://… --to postgres://…`
                               copies an SQLite database's records into an empty PostgreSQL one.
  database_pool_size           KANDEV_DATABASE_POOL_SIZE              16     (PostgreSQL connections)
  database_statement_timeout   KANDEV_DATABASE_STATEMENT_TIMEOUT      30s    (PostgreSQL cancels a longer statement)
  profiles_file                KANDEV_PROFILES_FILE                   ./profiles.yaml if present, else the built-in copy
  notifications.clarification_requested
                               KANDEV_NOTIFICATIONS__CLARIFICATION_REQUESTED  true
  notifications.turn_finished  KANDEV_NOTIFICATIONS__TURN_FINISHED    false
  executor.kind                KANDEV_EXECUTOR__KIND                  local  (local | remote)
  executor.agentctl            KANDEV_EXECUTOR__AGENTCTL              the agentctl beside kandev (local)
  executor.url, executor.token KANDEV_EXECUTOR__URL, KANDEV_EXECUTOR__TOKEN  (remote: ws://host:port or wss://, bearer token)
  executor.ca_cert             KANDEV_EXECUTOR__CA_CERT               system roots (wss://: PEM CA to verify agentctl against)
  server.allowed_hosts         extra Host names served (kandev.example.com, host:port, .example.com); always 127.0.0.1, localhost, [::1]
  server.allowed_origins       extra origins allowed to open the WebSocket and POST (https://ops.example.com); always the server's own
  server.tls.cert, server.tls.key  PEM certificate chain and key: serve HTTPS/WSS
  auth.required                KANDEV_AUTH__REQUIRED                  true unless listen is loopback (false is refused elsewhere)
  [[auth.operators]] name, token_sha256   who may operate; `kandev operator add NAME` prints both
  auth.session_secret          KANDEV_AUTH__SESSION_SECRET            unset (mixed into the session-cookie key; same on every replica)
  metrics.listen               KANDEV_METRICS__LISTEN                 unset (GET /metrics is on `listen` behind operator auth;
                               this adds a listener serving only /metrics, no auth)
  drain.grace                  KANDEV_DRAIN__GRACE                    0s  (after SIGTERM: keep serving, /readyz 503, no new sessions)
  drain.finish_within          KANDEV_DRAIN__FINISH_WITHIN            10s (then: no new connections; requests in flight may finish)
  agents.<id>.command          program and arguments, e.g. [\"claude-agent-acp\"]
  agents.<id>.env              extra environment of the agent process
  agents.<id>.inherit_env      names of variables the agent also gets from agentctl's environment, e.g. [\"ANTHROPIC_API_KEY\"]
                               (agents otherwise get only PATH HOME USER LANG LC_* TERM TMPDIR SHELL, never KANDEV_*,
                               AGENTCTL_TOKEN or DATABASE_URL)
  agents.<id>.cwd              working directory of the agent process
  agents.<id>.permission_policy  allow_once | allow_always | reject_once | cancel
  agents.<id>.mcp_servers.<name>
                               the agent's own MCP servers, passed in session/new beside
                               kandev's (name `kandev` is taken): type = \"stdio\" with
                               command = [program, args...] and env = {...}, or
                               type = \"http\" with url and headers = {...} (the agent
                               must accept HTTP MCP servers)
  agents.<id>.on_deadline      decline (default) | defaults | cancel: what an unanswered
                               elicitation gets when agentctl's answer deadline passes
  [[agents.<id>.auto_answers]] name, what to match (question_id, message and prompt
                               regexes, tool), what to answer (options and/or text, or
                               answer = \"defaults\" | \"skip\") and after (0s up to the
                               deadline): answers as rule:<name> unless answered first
  The default agent `mock` runs the mock-agent beside kandev with `--scenario demo`.
  A double underscore in an env var nests: KANDEV_AGENTS__MOCK__CWD=/tmp.

OTHER ENVIRONMENT
  KANDEV_FEATURES_ACP_ELICITATION  true|false: forces features.acpElicitation and locks
                                   the Settings toggle (PATCH answers 409).
  KANDEV_ELICITATION_ANSWER_TIMEOUT, KANDEV_ACP_IDLE_TIMEOUT, KANDEV_ASK_USER_QUESTION_TIMEOUT
                                   read by agentctl; the local executor passes them on
                                   (defaults 55m, 1h and 2h), with RUST_LOG, NO_COLOR, the
                                   agent allowlist and the inherit_env names, nothing else.
  RUST_LOG                         log filter (default info).
  KANDEV_LOG_FORMAT                text | json, as --log-format. A local agentctl logs as
                                   AGENTCTL_LOG_FORMAT says (default text); its lines reach
                                   kandev's log as the message of target kandev::agentctl.

A bad value, an unknown key or an unknown KANDEV_* variable stops start-up with one line
naming the key (and the nearest valid one), exit code 2. So does a listen address that is
not loopback without [[auth.operators]].
Once listening, kandev prints KANDEV_LISTENING=<addr> on stdout.";

/// The Kandev backend: operator HTTP/WS API, SQLite or PostgreSQL store, sessions, clarifications.
#[derive(Debug, Parser)]
#[command(name = "kandev", version, about, after_long_help = CONFIG_HELP, after_help = CONFIG_HELP)]
struct Cli {
    /// Configuration file (TOML).
    #[arg(long, global = true, env = CONFIG_FILE_VAR, value_name = "PATH")]
    config: Option<PathBuf>,
    /// How log lines on stderr look: `text`, or `json` (one object per line, the
    /// `session_id`/`pending_id` of the enclosing spans at the top level).
    #[arg(
        long,
        global = true,
        env = "KANDEV_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: kandev_log::LogFormat,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the operator API (the default).
    Serve,
    /// Manage operators (who may use the API when auth is on).
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Copy every record of an SQLite database into an empty PostgreSQL database (stop
    /// kandev first), then point `database_url` at the PostgreSQL one.
    MigrateDb {
        /// The SQLite database, e.g. sqlite://data/kandev.db.
        #[arg(long, value_name = "URL")]
        from: String,
        /// The PostgreSQL database (must exist and be empty), e.g.
        /// postgres://kandev@db.example.com:5432/kandev.
        #[arg(long, value_name = "URL")]
        to: String,
    },
}

#[derive(Debug, Subcommand)]
enum OperatorCommand {
    /// Make a new token for NAME: prints the token once and the [[auth.operators]] lines
    /// to paste into kandev.toml (only the token's SHA-256 is stored).
    Add {
        /// The operator's name, shown as who answered (letters, digits, `.`, `_`, `@`, `-`).
        name: String,
    },
}

fn main() {
    let cli = Cli::parse();
    kandev_tls::install_process_provider();
    kandev_log::init(
        cli.log_format,
        "info,sqlx=warn",
        std::io::stderr,
        kandev_log::stderr_wants_colour(),
    );
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
        Command::Operator(OperatorCommand::Add { name }) => operator_add(&name),
        Command::MigrateDb { from, to } => migrate_db(cli.config, &from, &to),
    }
}

fn migrate_db(config_file: Option<PathBuf>, from: &str, to: &str) {
    use kandev_backend::migrate_db;
    use kandev_backend::store::redact_url;
    // The pool size and statement timeout of the target come from the configuration.
    let options = match Config::load(config_file.as_deref(), std::env::vars()) {
        Ok(config) => config.database_options(),
        Err(err) => {
            eprintln!("kandev: {err}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|err| {
        eprintln!("kandev: cannot start tokio: {err}");
        std::process::exit(1);
    });
    match runtime.block_on(migrate_db::sqlite_to_postgres(from, to, &options)) {
        Ok(report) => println!(
            "copied {report} from {} to {}",
            redact_url(from),
            redact_url(to)
        ),
        Err(err) => {
            eprintln!("kandev: migrate-db: {err}");
            std::process::exit(1);
        }
    }
}

fn operator_add(name: &str) {
    if !is_valid_operator_name(name) {
        eprintln!(
            "kandev: `{name}` is not a usable operator name: 1 to 64 letters, digits, `.`, `_`, `@` or `-`"
        );
        std::process::exit(2);
    }
    let token = kandev_backend::auth::fresh_token();
    let hash = kandev_backend::auth::token_sha256(&token);
    println!("Token for {name} (shown only now; hand it to {name}, kandev keeps only its hash):");
    println!();
    println!("  {token}");
    println!();
    println!("Add to kandev.toml (and restart kandev):");
    println!();
    println!("[[auth.operators]]");
    println!("name = \"{name}\"");
    println!("token_sha256 = \"{hash}\"");
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
