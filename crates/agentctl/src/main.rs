//! `agentctl`: runs ACP agents for the Kandev backend and serves the agent stream.
//!
//! ```text
//! AGENTCTL_TOKEN=secret agentctl serve --listen 127.0.0.1:7740
//! AGENTCTL_TOKEN=secret agentctl serve --listen 0.0.0.0:7740 --tls-cert cert.pem --tls-key key.pem
//! KANDEV_MCP_URL=… KANDEV_MCP_TOKEN=… agentctl mcp-stdio
//! agentctl elicitation map < params.json
//! agentctl elicitation respond --request params.json < answer.json
//! ```

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use kandev_agentctl::config::Timeouts;
use kandev_agentctl::debug_cli;
use kandev_agentctl::server::{AgentCtl, TOKEN_ENV as TOKEN_VAR};
use kandev_tls::ServeListener;

#[derive(Parser)]
#[command(
    name = "agentctl",
    version,
    about = "Runs one ACP agent per session and serves the Kandev agent stream.",
    long_about = "Runs one ACP agent per session and serves the Kandev agent stream.\n\n\
        Start it:   AGENTCTL_TOKEN=secret agentctl serve --listen 127.0.0.1:7740\n\
        Over TLS:   AGENTCTL_TOKEN=secret agentctl serve --listen 0.0.0.0:7740 --tls-cert cert.pem --tls-key key.pem\n\
        (the backend then uses executor.url = \"wss://host:7740\", and executor.ca_cert for a private CA)\n\
        Talk to it: websocat -H 'Authorization: Bearer secret' ws://127.0.0.1:7740/api/v1/agent/stream\n\
        then send one JSON request per line, e.g.\n  \
        {\"id\":\"1\",\"type\":\"request\",\"action\":\"agent.session.start\",\"payload\":{\"session_id\":\"s1\",\
        \"agent\":{\"id\":\"mock\",\"command\":[\"mock-agent\"]},\"flags\":{\"features.acpElicitation\":true}}}\n  \
        {\"id\":\"2\",\"type\":\"request\",\"action\":\"agent.prompt\",\"payload\":{\"text\":\"hi\"}}\n\
        Answers come back with the same id; events arrive as \
        {\"type\":\"notification\",\"action\":\"agent.event\",\"payload\":{\"event\":\"session_update\"|\"elicitation_requested\"|…}}.\n\n\
        Environment: AGENTCTL_TOKEN (required unless --token-file / AGENTCTL_TOKEN_FILE or --insecure-no-token), \
        KANDEV_ELICITATION_ANSWER_TIMEOUT (default 55m), KANDEV_ACP_IDLE_TIMEOUT (default 1h; must exceed \
        the answer timeout), KANDEV_ASK_USER_QUESTION_TIMEOUT (default 2h; the ask_user_question_kandev \
        tool call's own deadline), RUST_LOG (log filter; logs go to stderr), AGENTCTL_LOG_FORMAT \
        (text or json, as --log-format).\n\n\
        Agents get a chosen environment, not agentctl's: PATH, HOME, USER, LANG, LC_*, TERM, TMPDIR, \
        SHELL, the names in the session's agent.inherit_env and its agent.env; never AGENTCTL_TOKEN, \
        DATABASE_URL or any KANDEV_* variable."
)]
struct Cli {
    /// How log lines on stderr look: `text`, or `json` (one object per line, the
    /// `session_id`/`pending_id` of the enclosing spans at the top level).
    #[arg(
        long,
        global = true,
        env = "AGENTCTL_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: kandev_log::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the agent stream at /api/v1/agent/stream (and /healthz).
    Serve {
        /// Address to listen on; port 0 picks a free one. Prints `AGENTCTL_LISTENING <addr>` once bound.
        #[arg(long, default_value = "127.0.0.1:7740")]
        listen: SocketAddr,
        /// Accept streams without a token (local development only).
        #[arg(long)]
        insecure_no_token: bool,
        /// Read the agent-stream token from this file instead of AGENTCTL_TOKEN (e.g. a
        /// systemd credential: `--token-file %d/agentctl-token`); surrounding whitespace
        /// is ignored.
        #[arg(long, env = "AGENTCTL_TOKEN_FILE", value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// Shut down (cancelling every pending elicitation) when stdin reaches end of file.
        /// The backend's local executor holds that pipe, so agentctl goes away with the
        /// backend even when the backend is killed outright.
        #[arg(long)]
        exit_on_stdin_eof: bool,
        /// Serve the stream over TLS (wss://) with this PEM certificate chain (needs --tls-key).
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Serve Prometheus metrics at http://ADDR/metrics, without a token (bind it where
        /// only the scraper reaches); prints `AGENTCTL_METRICS_LISTENING <addr>` once bound.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Threads that run the sessions. One suits the local executor, which starts an
        /// agentctl per session; a host serving many sessions may give more.
        #[arg(long, value_name = "N", default_value = "1")]
        threads: NonZeroUsize,
    },
    /// Serve the session's ask_user_question_kandev MCP server on stdin/stdout, relaying
    /// to its HTTP endpoint (for agents without HTTP MCP support; agentctl lists this
    /// command in session/new itself).
    McpStdio {
        /// The HTTP MCP endpoint.
        #[arg(long, env = "KANDEV_MCP_URL")]
        url: String,
        /// Its bearer token.
        #[arg(long, env = "KANDEV_MCP_TOKEN", hide_env_values = true)]
        token: String,
    },
    /// Debug the elicitation mapping without an agent.
    #[command(subcommand)]
    Elicitation(ElicitationCommand),
}

#[derive(Subcommand)]
enum ElicitationCommand {
    /// Read `elicitation/create` params on stdin; print the mapped questions or `{"decline": …}`.
    Map,
    /// Read an operator answer `{answers, rejected, reject_reason}` on stdin; print the ACP
    /// response, or the validation error (exit code 1).
    Respond {
        /// File with the `elicitation/create` params the answer is for.
        #[arg(long)]
        request: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    kandev_tls::install_process_provider();
    match cli.command {
        Command::Serve {
            listen,
            insecure_no_token,
            token_file,
            exit_on_stdin_eof,
            tls_cert,
            tls_key,
            metrics,
            threads,
        } => {
            let tls = tls_cert.zip(tls_key);
            let listeners = Listeners { listen, metrics };
            let token = match stream_token(token_file.as_deref(), insecure_no_token) {
                Ok(token) => token,
                Err(message) => return config_error(&message),
            };
            let runtime = match serve_runtime(threads) {
                Ok(runtime) => runtime,
                Err(err) => {
                    return config_error(&format!("cannot start the async runtime: {err}"));
                }
            };
            serve(
                runtime,
                cli.log_format,
                listeners,
                token,
                exit_on_stdin_eof,
                tls,
            )
        }
        Command::McpStdio { url, token } => mcp_stdio(cli.log_format, url, token),
        Command::Elicitation(ElicitationCommand::Map) => {
            let Some(stdin) = read_stdin() else {
                return ExitCode::from(2);
            };
            print_outcome(debug_cli::map(&stdin))
        }
        Command::Elicitation(ElicitationCommand::Respond { request }) => {
            let params = match std::fs::read_to_string(&request) {
                Ok(params) => params,
                Err(err) => {
                    return config_error(&format!(
                        "cannot read --request {}: {err}",
                        request.display()
                    ));
                }
            };
            let Some(answer) = read_stdin() else {
                return ExitCode::from(2);
            };
            print_outcome(debug_cli::respond(&params, &answer))
        }
    }
}

fn read_stdin() -> Option<String> {
    let mut text = String::new();
    match std::io::stdin().read_to_string(&mut text) {
        Ok(_) => Some(text),
        Err(err) => {
            eprintln!("agentctl: cannot read stdin: {err}");
            None
        }
    }
}

fn print_outcome(outcome: debug_cli::Outcome) -> ExitCode {
    let text = serde_json::to_string_pretty(&outcome.output).unwrap_or_default();
    println!("{text}");
    if outcome.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// stderr for logs, never failing. When the process reading our stderr is gone (the
/// backend died), tracing-subscriber reports the failed write with `eprintln!`, which panics
/// on a broken pipe and takes a runtime worker down mid-shutdown; a lost log line is fine,
/// a lost answer to the agent is not.
struct LossyStderr;

impl Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// One clear line on stderr and exit code 2.
fn config_error(message: &str) -> ExitCode {
    eprintln!("agentctl: {message}");
    ExitCode::from(2)
}

fn mcp_stdio(log_format: kandev_log::LogFormat, url: String, token: String) -> ExitCode {
    // stdout is the MCP channel: logs go to stderr only.
    kandev_log::init(log_format, "warn", || LossyStderr, false);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => return config_error(&format!("cannot start the async runtime: {err}")),
    };
    match runtime.block_on(kandev_agentctl::mcp::run_stdio_bridge(url, token)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentctl mcp-stdio: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Where `serve` listens: the agent stream, and the metrics when asked.
struct Listeners {
    listen: SocketAddr,
    metrics: Option<SocketAddr>,
}

/// The agent-stream token: from `file`, else `AGENTCTL_TOKEN`; `None` only with
/// `--insecure-no-token`.
fn stream_token(file: Option<&Path>, insecure: bool) -> Result<Option<String>, String> {
    let token = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read --token-file {}: {err}", path.display()))?;
            let token = text.trim().to_owned();
            if token.is_empty() {
                return Err(format!("--token-file {} is empty", path.display()));
            }
            Some(token)
        }
        None => std::env::var(TOKEN_VAR)
            .ok()
            .filter(|t| !t.trim().is_empty()),
    };
    match (token, insecure) {
        (Some(token), _) => Ok(Some(token)),
        (None, true) => Ok(None),
        (None, false) => Err(format!(
            "{TOKEN_VAR} is not set; set it (or --token-file) to the agent-stream bearer token, or pass --insecure-no-token for local development"
        )),
    }
}

/// The runtime `serve` runs on: one thread, unless `threads` asks for more. One thread
/// spends less per event than a pool that hands work between its threads, which under
/// a streaming agent is most of agentctl's work (docs/decisions/0013-performance-floor.md).
fn serve_runtime(threads: NonZeroUsize) -> std::io::Result<tokio::runtime::Runtime> {
    if threads.get() == 1 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.get())
        .enable_all()
        .build()
}

fn serve(
    runtime: tokio::runtime::Runtime,
    log_format: kandev_log::LogFormat,
    listeners: Listeners,
    token: Option<String>,
    exit_on_stdin_eof: bool,
    tls: Option<(PathBuf, PathBuf)>,
) -> ExitCode {
    let timeouts = match Timeouts::from_env() {
        Ok(timeouts) => timeouts,
        Err(err) => return config_error(&err.to_string()),
    };
    let tls = match tls.map(|(cert, key)| kandev_tls::server_config(&cert, &key)) {
        None => None,
        Some(Ok(config)) => Some(config),
        Some(Err(err)) => return config_error(&err.to_string()),
    };
    // Colour only for a terminal: the backend and CI capture this stream into files.
    kandev_log::init(
        log_format,
        "info",
        || LossyStderr,
        kandev_log::stderr_wants_colour(),
    );
    let code = runtime.block_on(run_server(
        listeners,
        token,
        timeouts,
        exit_on_stdin_eof,
        tls,
    ));
    // Dropping the runtime would wait for every blocking task, and with
    // --exit-on-stdin-eof one is a stdin read that lasts until the backend closes the
    // pipe: a SIGTERM'd agentctl then hung until the backend killed it. Everything that
    // matters (pendings answered `cancel`, agents stopped) is done by now.
    runtime.shutdown_background();
    code
}

async fn run_server(
    listeners: Listeners,
    token: Option<String>,
    timeouts: Timeouts,
    exit_on_stdin_eof: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> ExitCode {
    let listen = listeners.listen;
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(err) => return config_error(&format!("cannot listen on {listen}: {err}")),
    };
    let bound = match listener.local_addr() {
        Ok(bound) => bound,
        Err(err) => return config_error(&format!("cannot read the bound address: {err}")),
    };
    // Sets TCP_NODELAY on every connection: frames are small and latency-bound, and
    // without it every answer waits on Nagle's algorithm meeting the peer's delayed ACK.
    let listener = match ServeListener::new(listener, tls) {
        Ok(listener) => listener,
        Err(err) => return config_error(&format!("cannot serve on {bound}: {err}")),
    };
    let scheme = if listener.is_tls() { "wss" } else { "ws" };
    if token.is_none() {
        tracing::warn!(
            "--insecure-no-token: the agent stream accepts anyone who can reach {bound}"
        );
    }
    tracing::info!(
        %bound,
        answer_timeout = %humantime::format_duration(timeouts.answer),
        idle_timeout = %humantime::format_duration(timeouts.idle),
        "agentctl listening on {scheme}://{bound}"
    );
    let app = AgentCtl::new(token, timeouts);
    let router = app.router();
    if let Some(addr) = listeners.metrics {
        let metrics = match tokio::net::TcpListener::bind(addr).await {
            Ok(metrics) => metrics,
            Err(err) => {
                return config_error(&format!("cannot listen on {addr} (--metrics): {err}"));
            }
        };
        match metrics.local_addr() {
            Ok(addr) => {
                tracing::info!(%addr, "metrics on http://{addr}/metrics");
                println!("AGENTCTL_METRICS_LISTENING {addr}");
            }
            Err(err) => return config_error(&format!("cannot read the metrics address: {err}")),
        }
        let load = Arc::clone(&app);
        let routes = kandev_agentctl::metrics::router(Arc::new(move || load.load()));
        // TCP_NODELAY like every other listener, so a scrape's reply is never held back.
        let metrics = axum::serve::ListenerExt::tap_io(metrics, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            if let Err(err) = axum::serve(metrics, routes).await {
                tracing::error!(error = %err, "the metrics listener failed");
            }
        });
    }
    println!("AGENTCTL_LISTENING {bound}");
    let _ = std::io::stdout().flush();

    let server = axum::serve(listener, router);
    tokio::select! {
        result = server => match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                tracing::error!(error = %err, "server failed");
                ExitCode::FAILURE
            }
        },
        signal = shutdown_trigger(exit_on_stdin_eof) => {
            tracing::info!(signal, "shutting down: cancelling pending elicitations and stopping agents");
            app.shutdown_all().await;
            ExitCode::SUCCESS
        }
    }
}

/// Resolves with the reason agentctl should shut down: a signal, or (when asked to watch it)
/// its stdin closing because the process that started it is gone.
async fn shutdown_trigger(exit_on_stdin_eof: bool) -> &'static str {
    if !exit_on_stdin_eof {
        return shutdown_signal().await;
    }
    tokio::select! {
        signal = shutdown_signal() => signal,
        () = stdin_closed() => "stdin closed",
    }
}

/// Reads and discards stdin until end of file. A read interrupted by a signal (agentctl
/// spawns agents, so SIGCHLD arrives) is retried; any other error counts as closed.
async fn stdin_closed() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                tracing::warn!(error = %err, "cannot read stdin; treating it as closed");
                return;
            }
        }
    }
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        },
        _ => {
            tracing::warn!("cannot install signal handlers; only ctrl-c is handled");
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}
