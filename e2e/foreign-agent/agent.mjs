#!/usr/bin/env node
// A small ACP agent from the real world for the kandev e2e suite: it speaks ACP over stdio
// through the official `@agentclientprotocol/sdk`, and asks its questions exactly the way
// the Claude bridge does, by importing the REAL AskUserQuestion builders shipped in
// `@agentclientprotocol/claude-agent-acp`'s `dist/elicitation.js` (0.65.0 or 0.101.0).
//
// Usage (as an agent command in kandev.toml):
//   node e2e/foreign-agent/agent.mjs --bridge 0.65.0 [--cache <bridge-cache dir>]
//
// The bridge cache is the one `node crates/elicitation/tests/bridge/bridge.mjs ensure <v>`
// fills (default `<repo>/target/bridge-cache`, or $KANDEV_BRIDGE_CACHE, or --cache).
//
// Prompt format (the text of the first text block of `session/prompt`):
//   ask <set> [bridge=<version>]
//     <set>      one of the question sets in questions.json (single, multi, mixed, other)
//     <version>  overrides --bridge for this turn (0.65.0 or 0.101.0)
//   anything else: the agent answers "foreign agent: say `ask <set>`" and ends the turn.
//
// On `ask`, like the real bridge:
//   - if the client did not advertise `elicitation.form`, AskUserQuestion is unavailable:
//     it says so in prose and ends the turn (what claude-agent-acp does: disallowedTools);
//   - otherwise it reports a `tool_call` (AskUserQuestion), builds the request with
//     `askUserQuestionsToCreateRequest(questions, sessionId, toolCallId)`, sends
//     `elicitation/create`, folds the client's response back with that version's
//     `applyAskElicitationResponse(response, {questions}, questions)`, and replies with one
//     agent text chunk holding the JSON
//       {"bridge": "<version>", "set": "<set>", "response": <the ACP response>,
//        "result": <what applyAskElicitationResponse returned>}
//     (the recorded answers are `result.updatedInput.answers`), then ends the turn `end_turn`.
//   - `session/cancel` while the question is open ends the turn `cancelled`.

import fs from "node:fs";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as acp from "@agentclientprotocol/sdk";
import { parsePrompt } from "./prompt.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "../..");
const BRIDGE = "@agentclientprotocol/claude-agent-acp";
const VERSIONS = ["0.65.0", "0.101.0"];

function parseArgs(argv) {
  const args = {
    bridge: "0.65.0",
    cache: process.env.KANDEV_BRIDGE_CACHE || path.join(REPO_ROOT, "target", "bridge-cache"),
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--bridge") args.bridge = argv[++i];
    else if (argv[i] === "--cache") args.cache = path.resolve(argv[++i]);
    else fail(`unknown argument ${argv[i]}`);
  }
  if (!VERSIONS.includes(args.bridge)) fail(`--bridge must be one of ${VERSIONS.join(", ")}`);
  return args;
}

function fail(message) {
  process.stderr.write(`foreign-agent: ${message}\n`);
  process.exit(2);
}

const ARGS = parseArgs(process.argv.slice(2));
const QUESTION_SETS = JSON.parse(fs.readFileSync(path.join(HERE, "questions.json"), "utf8"));

/** The real builders of one bridge version, from the conformance test's cache. */
const builders = new Map();
async function loadBridge(version) {
  if (!builders.has(version)) {
    const file = path.join(ARGS.cache, version, "node_modules", ...BRIDGE.split("/"), "dist", "elicitation.js");
    if (!fs.existsSync(file)) {
      throw new Error(
        `${file} is missing: run \`node crates/elicitation/tests/bridge/bridge.mjs ensure ${version}\``,
      );
    }
    builders.set(version, await import(pathToFileURL(file).href));
  }
  return builders.get(version);
}

class ForeignAgent {
  constructor(connection) {
    this.connection = connection;
    this.clientCapabilities = {};
    this.turns = new Map(); // sessionId -> AbortController of the running turn
    this.toolCalls = 0;
  }

  async initialize(params) {
    this.clientCapabilities = params.clientCapabilities ?? {};
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false },
      authMethods: [],
    };
  }

  async authenticate() {
    return {};
  }

  async newSession() {
    return { sessionId: `foreign-${process.pid}-${Date.now().toString(36)}` };
  }

  async cancel(params) {
    this.turns.get(params.sessionId)?.abort();
  }

  async say(sessionId, text) {
    await this.connection.sessionUpdate({
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
  }

  async prompt(params) {
    const sessionId = params.sessionId;
    const text = (params.prompt ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
    const ask = parsePrompt(text, ARGS.bridge);
    if (!ask) {
      await this.say(sessionId, "foreign agent: say `ask <set> [bridge=<version>]`");
      return { stopReason: "end_turn" };
    }
    const questions = QUESTION_SETS[ask.set];
    if (!questions || !VERSIONS.includes(ask.version)) {
      await this.say(sessionId, `foreign agent: unknown set ${ask.set} or bridge ${ask.version}`);
      return { stopReason: "end_turn" };
    }
    if (!this.clientCapabilities?.elicitation?.form) {
      await this.say(sessionId, "I don't have the AskUserQuestion tool available in this session.");
      return { stopReason: "end_turn" };
    }
    const abort = new AbortController();
    this.turns.set(sessionId, abort);
    try {
      const bridge = await loadBridge(ask.version);
      const toolInput = { questions };
      // The bridge's own gatekeeper, as it runs before building the form.
      const extracted = bridge.extractAskUserQuestions(toolInput);
      const toolCallId = `ask-${++this.toolCalls}`;
      await this.connection.sessionUpdate({
        sessionId,
        update: {
          sessionUpdate: "tool_call",
          toolCallId,
          title: "AskUserQuestion",
          kind: "other",
          status: "pending",
          rawInput: toolInput,
        },
      });
      const request = bridge.askUserQuestionsToCreateRequest(extracted, sessionId, toolCallId);
      const cancelled = new Promise((resolve) => abort.signal.addEventListener("abort", () => resolve(null)));
      const response = await Promise.race([this.connection.unstable_createElicitation(request), cancelled]);
      if (response === null) return { stopReason: "cancelled" };
      const result = bridge.applyAskElicitationResponse(response, toolInput, extracted);
      await this.connection.sessionUpdate({
        sessionId,
        update: { sessionUpdate: "tool_call_update", toolCallId, status: "completed" },
      });
      await this.say(sessionId, JSON.stringify({ bridge: ask.version, set: ask.set, response, result }));
      return { stopReason: "end_turn" };
    } catch (err) {
      await this.say(sessionId, `foreign agent error: ${err?.message ?? err}`);
      return { stopReason: "end_turn" };
    } finally {
      this.turns.delete(sessionId);
    }
  }
}

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = new acp.AgentSideConnection((conn) => new ForeignAgent(conn), stream);
await connection.closed;
