#!/usr/bin/env node
// Executes the pure elicitation builders shipped in `dist/elicitation.js` of
// `@agentclientprotocol/claude-agent-acp`, so Kandev's mapping can be checked
// against the real bridge rather than against a reading of its source.
//
// Usage:  node bridge.mjs <op> <version> [--cache <dir>]   (input JSON on stdin)
//         node bridge.mjs capture [--cache <dir>]          (rewrites the fixtures)
//
//   ensure   -                                   -> {"version", "dir"}
//   build    {questions, sessionId, toolCallId}  -> askUserQuestionsToCreateRequest(...)
//   apply    {response, toolInput, questions}    -> applyAskElicitationResponse(...)
//   refusal  {prompt, sessionId}                 -> refusalFallbackToCreateRequest(...)
//   mcp      {request, sessionId}                -> mcpElicitationToCreateRequest(...)
//   refusal-result {response}                    -> refusalFallbackResultFromResponse(...)
//   mcp-result     {response}                    -> createElicitationResponseToElicitResult(...)
//   exports  -                                   -> the names dist/elicitation.js exports
//   batch    [{op, input}, ...]                  -> [result, ...] (one Node start for many calls)
//
// Each version is fetched once with `npm pack` (no install, no lifecycle
// scripts), checked against a pinned sha512, and extracted into
// `<cache>/<version>/node_modules/...`; later runs only check a marker file.
// The cache defaults to `<repo>/target/bridge-cache` (ignored by git).
//
// 0.101.0 takes a fourth `airClient` argument in the builder; it is left at its
// default (false) because Kandev is an ordinary client. Pass `"airClient": true`
// in the build input to see what JetBrains AIR gets instead.

import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, "../../../..");
const FIXTURES = path.resolve(HERE, "../fixtures/bridge");
const BRIDGE = "@agentclientprotocol/claude-agent-acp";

// Exact tarballs per bridge version. 0.65.0's dist imports the ACP SDK (which
// in turn needs zod) for its response guard; 0.101.0 imports only its own files.
const PACKAGES = {
  "0.65.0": [
    {
      spec: `${BRIDGE}@0.65.0`,
      name: BRIDGE,
      integrity:
        "sha512-GFuunTgevDlOlC/Z3QqVziaUBbeXrTyAS9pBKSikJoJOSSbGkHCvOcCPsSdj+RUCQ0I9czZoBx8z4S+g0q2Xig==",
    },
    {
      spec: "@agentclientprotocol/sdk@1.3.0",
      name: "@agentclientprotocol/sdk",
      integrity:
        "sha512-i3h/efaeuMUFAO1HSfo97QZQnnvMd7wWBYtBsdL6UMZg3a78sk3Ffya5Xu7C7tYsXomXoDXJBAzQF2PcFKAhIQ==",
    },
    {
      spec: "zod@4.1.12",
      name: "zod",
      integrity:
        "sha512-JInaHOamG8pt5+Ey8kGmdcAcg3OL9reK8ltczgHTAwNhMys/6ThXHityHxVV2p3fkw/c+MAvBHFVYHFZDmjMCQ==",
    },
  ],
  "0.101.0": [
    {
      spec: `${BRIDGE}@0.101.0`,
      name: BRIDGE,
      integrity:
        "sha512-c9YGBfdJrLcKiinRpXuDuibC+CRGqQpe9+ey/+TuuZ7ejHlVyEELbbvRkxHZN+Hf5XGecJD5i0kvP2opCseATA==",
    },
  ],
};

/** A failure reported as `bridge.mjs: <message>` with exit code 2 (1 is Node's own). */
class BridgeError extends Error {}

/** Throws, so that `finally` blocks (staging clean-up) still run. */
function die(message) {
  throw new BridgeError(message);
}

function parseArgs(argv) {
  const positional = [];
  let cache = process.env.KANDEV_BRIDGE_CACHE || path.join(REPO_ROOT, "target", "bridge-cache");
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--cache") {
      if (i + 1 >= argv.length) die("--cache needs a directory");
      cache = path.resolve(argv[++i]);
    } else {
      positional.push(argv[i]);
    }
  }
  return { op: positional[0], version: positional[1], cache };
}

function sha512(file) {
  return `sha512-${createHash("sha512").update(fs.readFileSync(file)).digest("base64")}`;
}

const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** Downloads one tarball with `npm pack` and extracts it to `dest`. */
function fetchPackage(pkg, workDir, dest) {
  let packed;
  try {
    packed = execFileSync(
      npm,
      ["pack", pkg.spec, "--json", "--ignore-scripts", "--pack-destination", workDir],
      { cwd: workDir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
  } catch (err) {
    die(`npm pack ${pkg.spec} failed: ${err.stderr || err.message}`);
  }
  let filename;
  try {
    filename = JSON.parse(packed)[0].filename;
  } catch {
    die(`npm pack ${pkg.spec} printed no JSON: ${packed}`);
  }
  const tarball = path.join(workDir, filename);
  const actual = sha512(tarball);
  if (actual !== pkg.integrity) {
    die(`${pkg.spec}: integrity ${actual} does not match the pinned ${pkg.integrity}`);
  }
  fs.mkdirSync(dest, { recursive: true });
  try {
    execFileSync("tar", ["-xzf", tarball, "-C", dest, "--strip-components=1"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  } catch (err) {
    die(`extracting ${tarball} failed: ${err.stderr || err.message}`);
  }
}

/**
 * Makes `<cache>/<version>` hold the packages of that version. Builds in a
 * private temporary folder and renames it into place, so concurrent callers
 * never see a half-extracted tree.
 */
function ensure(version, cache) {
  const packages = PACKAGES[version];
  if (!packages) die(`unknown bridge version ${version}; known: ${Object.keys(PACKAGES).join(", ")}`);
  const dir = path.join(cache, version);
  const marker = path.join(dir, ".complete");
  const expected = packages.map((p) => `${p.spec} ${p.integrity}`).join("\n");
  if (fs.existsSync(marker) && fs.readFileSync(marker, "utf8") === expected) {
    return dir;
  }
  fs.mkdirSync(cache, { recursive: true });
  const staging = fs.mkdtempSync(path.join(cache, `.staging-${version}-`));
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "kandev-bridge-"));
  try {
    for (const pkg of packages) {
      fetchPackage(pkg, work, path.join(staging, "node_modules", ...pkg.name.split("/")));
    }
    fs.writeFileSync(path.join(staging, ".complete"), expected);
    fs.rmSync(dir, { recursive: true, force: true });
    try {
      fs.renameSync(staging, dir);
    } catch (err) {
      // Another process won the race; its tree is as good as ours.
      if (!(fs.existsSync(marker) && fs.readFileSync(marker, "utf8") === expected)) throw err;
    }
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

async function loadBuilders(version, cache) {
  const dir = ensure(version, cache);
  const file = path.join(dir, "node_modules", ...BRIDGE.split("/"), "dist", "elicitation.js");
  return import(pathToFileURL(file).href);
}

function readStdin() {
  const text = fs.readFileSync(0, "utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch (err) {
    die(`stdin is not JSON: ${err.message}`);
  }
}

function need(builders, name, version) {
  const fn = builders[name];
  if (typeof fn !== "function") die(`${BRIDGE}@${version} exports no ${name}`);
  return fn;
}

async function run(op, version, cache, input) {
  if (op === "ensure") return { version, dir: ensure(version, cache) };
  const b = await loadBuilders(version, cache);
  switch (op) {
    case "exports":
      return Object.keys(b).sort();
    case "build": {
      const args = [input.questions, input.sessionId, input.toolCallId];
      if (input.airClient !== undefined) args.push(input.airClient);
      return need(b, "askUserQuestionsToCreateRequest", version)(...args);
    }
    case "apply":
      return need(b, "applyAskElicitationResponse", version)(
        input.response,
        input.toolInput,
        input.questions,
      );
    case "refusal":
      return need(b, "refusalFallbackToCreateRequest", version)(input.prompt, input.sessionId);
    case "mcp":
      return need(b, "mcpElicitationToCreateRequest", version)(input.request, input.sessionId);
    case "refusal-result":
      return need(b, "refusalFallbackResultFromResponse", version)(input.response);
    case "mcp-result":
      return need(b, "createElicitationResponseToElicitResult", version)(input.response);
    case "batch": {
      if (!Array.isArray(input)) die("batch input must be a JSON array of {op, input}");
      const results = [];
      for (const call of input) {
        if (call.op === "batch" || call.op === "ensure") die(`op ${call.op} cannot be batched`);
        results.push(await run(call.op, version, cache, call.input ?? {}));
      }
      return results;
    }
    default:
      return die(
        `unknown op ${op}; known: ensure, exports, build, apply, refusal, mcp, ` +
          "refusal-result, mcp-result, batch, capture",
      );
  }
}

/** The bytes a fixture holds: two-space JSON with a trailing newline. */
function fixtureText(value) {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/**
 * Rewrites every captured fixture from `inputs.json`: for each version, each
 * question set through the AskUserQuestion builder, plus the refusal and MCP
 * cases. The Rust test recomputes the same outputs and fails on any drift.
 */
async function capture(cache) {
  const inputs = JSON.parse(fs.readFileSync(path.join(FIXTURES, "inputs.json"), "utf8"));
  const written = [];
  for (const version of Object.keys(PACKAGES)) {
    for (const [name, questions] of Object.entries(inputs.question_sets)) {
      const request = await run("build", version, cache, {
        questions,
        sessionId: inputs.session_id,
        toolCallId: inputs.tool_call_id,
      });
      const file = path.join(FIXTURES, `v${version}-${name}.json`);
      fs.writeFileSync(file, fixtureText(request));
      written.push(path.relative(REPO_ROOT, file));
    }
    const refusal = await run("refusal", version, cache, {
      prompt: inputs.refusal_prompt,
      sessionId: inputs.session_id,
    });
    const mcp = await run("mcp", version, cache, {
      request: inputs.mcp_request,
      sessionId: inputs.session_id,
    });
    const extra = [
      ["refusal", refusal],
      ["mcp", mcp],
    ];
    // What a JetBrains AIR client gets from 0.101.0: the companion marker is back.
    if (version === "0.101.0") {
      extra.push([
        "air-mixed",
        await run("build", version, cache, {
          questions: inputs.question_sets.mixed,
          sessionId: inputs.session_id,
          toolCallId: inputs.tool_call_id,
          airClient: true,
        }),
      ]);
    }
    for (const [name, value] of extra) {
      const file = path.join(FIXTURES, `v${version}-${name}.json`);
      fs.writeFileSync(file, fixtureText(value));
      written.push(path.relative(REPO_ROOT, file));
    }
  }
  return { written };
}

async function main() {
  const { op, version, cache } = parseArgs(process.argv.slice(2));
  if (!op) die("usage: bridge.mjs <ensure|exports|build|apply|refusal|mcp|batch> <version> | capture");
  if (op === "capture") return capture(cache);
  if (!version) die(`${op} needs a bridge version (${Object.keys(PACKAGES).join(", ")})`);
  return run(op, version, cache, op === "ensure" || op === "exports" ? {} : readStdin());
}

try {
  const result = await main();
  process.stdout.write(`${JSON.stringify(result === undefined ? null : result)}\n`);
} catch (err) {
  process.stderr.write(`bridge.mjs: ${err instanceof BridgeError ? err.message : err.stack}\n`);
  process.exitCode = 2;
}
