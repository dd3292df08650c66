//! `mock-agent`: a scripted ACP agent over stdio, for demos and tests of Kandev.
//!
//! See `mock-agent --help` (its long help, `LONG_ABOUT` below) for the scenario format.

mod agent;
mod bridge_form;
mod capability;
mod catalog;
mod frame_log;
mod mcp_client;
mod scenario;
mod turn;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::agent::MockAgent;
use crate::catalog::Catalog;
use crate::frame_log::FrameLog;
use crate::wire::Wire;

const LONG_ABOUT: &str = "\
A scripted ACP agent (protocol v1) over stdio, for demos and tests of Kandev.

stdin and stdout carry newline-delimited JSON-RPC and nothing else; logs go to
stderr (filter with RUST_LOG, default `info`).

Every session/prompt plays one scenario: a prompt starting with `/e2e:NAME`
plays NAME (the rest of the prompt is ignored), any other prompt plays
--scenario. An unknown scenario is answered with the text `unknown scenario
NAME` and the turn ends `end_turn`. session/cancel stops the scenario and the
prompt returns `cancelled`; elicitations already sent stay outstanding.

A scenario is a JSON file {\"name\", \"description\", \"steps\": [...]}; each step is
an object with one key (errors name the step, e.g. `steps[2]: unknown step`):
  {\"text\": \"Hello\"}
      session/update agent_message_chunk
  {\"stream\": {\"chunks\": 500, \"text\": \"word \", \"thought\": false}}
      that many chunks back to back, chunk i (from 1) `i:word `;
      agent_thought_chunk with thought
  {\"tool_call\": {\"toolCallId\": \"t1\", \"title\": \"Read\", ...}}, {\"tool_call_update\": {...}}
      session/update with these ACP fields, verbatim
  {\"elicit\": {\"id\": \"e1\", \"params\": {...}}}
      elicitation/create with these params; does not wait, so several
      elicitations can be in flight at once
  {\"elicit_questions\": {\"id\", \"tool_call_id\", \"questions\": [{\"question\", \"header\",
      \"options\": [{\"label\", \"description\"}], \"multiSelect\"}]}}
      the form claude-agent-acp 0.65.0 builds for AskUserQuestion
  {\"elicit_raw\": {\"id\", \"params\": <any JSON, even a string>}}
      params sent exactly as given
  {\"cancel_elicitation\": {\"id\", \"after_ms\": 50}}
      $/cancel_request for that request after the delay; does not block
  {\"await\": {\"id\"}}
      wait for the answer, then say `elicitation ID result: <compact JSON>`
      (an error answer is reported as {\"error\": {...}})
  {\"say_choice\": {\"id\", \"question\": \"question_0\"}}
      wait, then say \"You picked Red.\" / \"You skipped the question.\"
  {\"ask_user_question\": {\"id\": \"a1\", \"arguments\": {\"questions\": [{\"id\", \"title\",
      \"prompt\", \"options\": [{\"label\", \"description\"}]}], \"context\"}}}
      call the client's ask_user_question_kandev MCP tool (the server named
      `kandev` in session/new's mcpServers, http or stdio); does not wait
  {\"await_tool\": {\"id\": \"a1\"}}
      wait for that call, then say `ask_user_question ID result: <compact JSON>`
      (the tool's JSON text; `\"is_error\": true` added for a tool error;
      {\"error\": \"...\"} when the server could not be reached)
  {\"request_permission\": {\"toolCallId\", \"options\": [...]}}
      session/request_permission; say `permission ID result: <JSON>`
  {\"sleep_ms\": 100}
  {\"if_capability\": \"elicitation.form\", \"then\": [...], \"else\": [...]}
      branch on that path being non-null in initialize's clientCapabilities
  {\"end_turn\": \"end_turn\"|\"cancelled\"|\"max_tokens\"|\"refusal\"}
      return the prompt (running out of steps ends `end_turn`)
  {\"exit\": 3}
      exit the process with that code at once
\"$SESSION_ID\" in string values (every step but elicit_raw) becomes the ACP
session id. Embedded scenarios: --list-scenarios.

Environment:
  MOCK_AGENT_NO_HTTP_MCP=1  same as --no-http-mcp
  MOCK_AGENT_LOG=PATH   append every JSON-RPC frame received and sent, one
                        {\"dir\": \"recv\"|\"send\", \"frame\": {...}} per line,
                        flushed per line
  RUST_LOG              log filter for stderr

Talk to it by hand: run `mock-agent` and paste one line at a time, each after
the previous answer (requests sent before `initialize` completes are refused):
  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{\"elicitation\":{\"form\":{}}}}}
  {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":{\"cwd\":\"/tmp\",\"mcpServers\":[]}}
  {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"mock-session-1\",\"prompt\":[{\"type\":\"text\",\"text\":\"/e2e:single\"}]}}
  then answer the elicitation/create it sends, using its id:
  {\"jsonrpc\":\"2.0\",\"id\":\"<id>\",\"result\":{\"action\":\"accept\",\"content\":{\"question_0\":\"Postgres\"}}}";

/// Command line of `mock-agent`.
#[derive(Debug, Parser)]
#[command(
    name = "mock-agent",
    version,
    about = "Scripted ACP agent over stdio for demos and tests.",
    long_about = LONG_ABOUT
)]
struct Cli {
    /// Scenario for prompts that do not start with `/e2e:NAME`.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "demo",
        env = "MOCK_AGENT_SCENARIO"
    )]
    scenario: String,
    /// Directory of more scenarios, one `NAME.json` each; they take precedence
    /// over embedded scenarios of the same name.
    #[arg(long, value_name = "DIR", env = "MOCK_AGENT_SCENARIO_DIR")]
    scenario_dir: Option<PathBuf>,
    /// Print the available scenarios and exit.
    #[arg(long)]
    list_scenarios: bool,
    /// Do not advertise `mcpCapabilities.http`, so the client offers its MCP servers
    /// over stdio (agentctl then lists its `agentctl mcp-stdio` bridge).
    #[arg(
        long,
        env = "MOCK_AGENT_NO_HTTP_MCP",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    no_http_mcp: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    kandev_tls::install_process_provider();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,agent_client_protocol=warn")
            }),
        )
        .init();

    let catalog = Catalog::new(cli.scenario_dir.clone());
    if cli.list_scenarios {
        return list_scenarios(&catalog);
    }
    if let Err(error) = catalog.load(&cli.scenario) {
        eprintln!("mock-agent: --scenario {}: {error}", cli.scenario);
        return ExitCode::from(2);
    }
    let log = match std::env::var_os("MOCK_AGENT_LOG").filter(|path| !path.is_empty()) {
        Some(path) => match FrameLog::open(path.as_ref()) {
            Ok(log) => Some(log),
            Err(error) => {
                eprintln!(
                    "mock-agent: cannot open MOCK_AGENT_LOG {}: {error}",
                    PathBuf::from(path).display()
                );
                return ExitCode::from(2);
            }
        },
        None => None,
    };

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mock-agent: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(scenario = %cli.scenario, "mock-agent ready on stdio");
    let agent = MockAgent::new(Wire::new(log), catalog, cli.scenario, !cli.no_http_mcp);
    let result = runtime.block_on(agent.serve());
    // stdin is at EOF or broken; do not wait on leftover tasks such as delayed cancels.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mock-agent: connection failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn list_scenarios(catalog: &Catalog) -> ExitCode {
    let listings = match catalog.list() {
        Ok(listings) => listings,
        Err(error) => {
            eprintln!("mock-agent: {error}");
            return ExitCode::from(2);
        }
    };
    let mut broken = false;
    for listing in listings {
        match listing.summary {
            Ok(description) => println!("{:<16} {description}", listing.name),
            Err(problem) => {
                broken = true;
                println!(
                    "{:<16} INVALID ({}): {problem}",
                    listing.name, listing.origin
                );
            }
        }
    }
    if broken {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_to_demo_and_takes_a_directory() {
        let cli = Cli::try_parse_from(["mock-agent"]).expect("parses");
        assert_eq!(cli.scenario, "demo");
        assert!(cli.scenario_dir.is_none());
        let cli =
            Cli::try_parse_from(["mock-agent", "--scenario", "plain", "--scenario-dir", "/x"])
                .expect("parses");
        assert_eq!(cli.scenario, "plain");
        assert_eq!(
            cli.scenario_dir.as_deref(),
            Some(std::path::Path::new("/x"))
        );
        assert!(Cli::try_parse_from(["mock-agent", "--bogus"]).is_err());
    }
}
