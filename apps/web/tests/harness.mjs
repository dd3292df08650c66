// Browser-test harness: a real `kandev` (with the real agentctl and mock-agent) on a free
// port with its own temp directory, database and kandev.toml; headless Debian chromium via
// playwright-core; helpers that wait with deadlines (never fixed sleeps).
//
// The UI under test is the one embedded in kandev (served at `/`); WEB_UI_FROM_SOURCE=1
// serves apps/web/static from the work tree instead, proxying /api and /healthz (HTTP and
// WebSocket) to kandev.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, createReadStream, statSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../../..");
export const staticDir = path.resolve(here, "../static");
export const pagesDir = path.join(here, "pages");
export const fixturesDir = path.join(here, "fixtures");
/** Mock-agent scenarios of the browser tests (`--scenario-dir`), beside the embedded ones. */
export const scenarioDir = path.join(fixturesDir, "scenarios");
const binDir = path.join(repoRoot, "target", "debug");
export const bins = {
  kandev: path.join(binDir, "kandev"),
  agentctl: path.join(binDir, "agentctl"),
  mockAgent: path.join(binDir, "mock-agent"),
};
export const screenshotDir = path.join(repoRoot, "target", "browser-screenshots");

// ---------------------------------------------------------------------------------------
// Waiting.

/** Poll `fn` until it returns a truthy value (returned) or the deadline passes (throws). */
export async function waitFor(fn, { timeout = 15_000, interval = 50, message = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${message}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

async function freePort() {
  const server = net.createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

// ---------------------------------------------------------------------------------------
// kandev.

function tomlString(s) {
  return JSON.stringify(s); // TOML basic strings share JSON's escapes for our inputs
}

/**
 * Start kandev. Options: `env` (extra environment, e.g. KANDEV_FEATURES_ACP_ELICITATION),
 * `executor` ({kind: "remote", url, token} or undefined for local), `agentEnv`, `toml`
 * (extra kandev.toml, e.g. an `[auth]` section); the mock agent also plays the scenarios
 * of tests/fixtures/scenarios (`/e2e:NAME`).
 * Returns `{url, apiUrl, dir, agentLog, api, logs(), stop()}`.
 */
export async function startKandev({ env = {}, executor, agentEnv = {}, toml = "" } = {}) {
  for (const [name, file] of Object.entries(bins)) {
    if (!existsSync(file)) throw new Error(`${name} binary missing at ${file}: run \`cargo build --workspace --bins\` (just e2e-browser does)`);
  }
  const dir = mkdtempSync(path.join(tmpdir(), "kandev-web-"));
  const port = await freePort();
  const agentLog = path.join(dir, "agent.log");
  const lines = [
    `profile = "e2e"`,
    `listen = "127.0.0.1:${port}"`,
    `database_url = ${tomlString(`sqlite://${path.join(dir, "kandev.db")}`)}`,
    ``,
    `[agents.mock]`,
    `command = [${[bins.mockAgent, "--scenario-dir", scenarioDir].map(tomlString).join(", ")}]`,
    `env = { ${Object.entries({ MOCK_AGENT_LOG: agentLog, ...agentEnv }).map(([k, v]) => `${k} = ${tomlString(v)}`).join(", ")} }`,
  ];
  if (executor?.kind === "remote") {
    lines.push(``, `[executor]`, `kind = "remote"`, `url = ${tomlString(executor.url)}`, `token = ${tomlString(executor.token)}`);
  } else {
    lines.push(``, `[executor]`, `kind = "local"`, `agentctl = ${tomlString(bins.agentctl)}`);
  }
  const configPath = path.join(dir, "kandev.toml");
  writeFileSync(configPath, `${lines.join("\n")}\n${toml}\n`);
  const output = [];
  const child = spawn(bins.kandev, [], {
    cwd: dir,
    env: { ...cleanEnv(), KANDEV_CONFIG: configPath, RUST_LOG: process.env.RUST_LOG ?? "info", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (d) => output.push(d.toString()));
  child.stderr.on("data", (d) => output.push(d.toString()));
  const exited = once(child, "exit");
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`kandev exited with ${child.exitCode}: ${output.join("").slice(-2000)}`);
      const res = await fetch(`${base}/healthz`);
      return res.ok;
    }, { timeout: 30_000, message: "kandev /healthz" });
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }

  // WEB_UI_FROM_SOURCE=1 serves apps/web/static from the work tree (proxying the API to
  // kandev), to iterate on the UI without rebuilding kandev; otherwise the UI under test
  // is the one embedded in the binary.
  let uiServer = null;
  let url = base;
  if (process.env.WEB_UI_FROM_SOURCE === "1") {
    uiServer = await startWebServer({ backend: base });
    url = uiServer.url;
  } else if (!(await servesUi(base))) {
    child.kill("SIGKILL");
    throw new Error(`kandev at ${base} does not serve the embedded UI at /`);
  }

  return {
    url,
    apiUrl: base,
    dir,
    agentLog,
    api: apiClient(base),
    logs: () => output.join(""),
    async stop() {
      await uiServer?.close();
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function cleanEnv() {
  // The feature flag and timeouts come only from what a test passes.
  const env = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith("KANDEV_")) delete env[key];
  return env;
}

async function servesUi(base) {
  try {
    const res = await fetch(`${base}/`);
    return res.ok && (await res.text()).includes('src="/app.js"');
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------
// The operator API, for test setup and assertions.

export function apiClient(base) {
  async function call(method, p, body) {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = { raw: text };
    }
    if (!res.ok) throw new Error(`${method} ${p} → ${res.status} ${text}`);
    return json;
  }
  return {
    call,
    createTask: (title, description = "") => call("POST", "/api/v1/tasks", { title, description }),
    startSession: (taskId, prompt, agent = "mock") => call("POST", `/api/v1/tasks/${taskId}/sessions`, { agent, prompt }),
    session: (id) => call("GET", `/api/v1/sessions/${id}`),
    tasks: () => call("GET", "/api/v1/tasks").then((b) => b.tasks),
    messages: (id) => call("GET", `/api/v1/sessions/${id}/messages`).then((b) => b.messages),
    clarifications: (sessionId, status) =>
      call("GET", `/api/v1/clarifications?session_id=${encodeURIComponent(sessionId)}${status ? `&status=${status}` : ""}`).then((b) => b.clarifications),
    flags: () => call("GET", "/api/v1/runtime-flags").then((b) => b.flags),
  };
}

/** A task with a session started on `prompt`; waits until its clarification is pending. */
export async function sessionWithPendingClarification(kandev, prompt, title = prompt) {
  const task = await kandev.api.createTask(title, `Browser test: ${prompt}`);
  const session = await kandev.api.startSession(task.id, prompt);
  const [record] = await waitFor(async () => {
    const list = await kandev.api.clarifications(session.id, "pending");
    return list.length > 0 ? list : null;
  }, { timeout: 20_000, message: `a pending clarification for ${prompt}` });
  return { task, session, record };
}

// ---------------------------------------------------------------------------------------
// The mock agent's frame log.

/** Every `{dir, frame}` line written so far. */
export function readAgentLog(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter(Boolean).flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return []; // a line being written
    }
  });
}

/** The responses the agent received to its `elicitation/create` requests, in order. */
export function elicitationResults(file) {
  const entries = readAgentLog(file);
  const ids = new Set(entries.filter((e) => e.dir === "send" && e.frame?.method === "elicitation/create").map((e) => JSON.stringify(e.frame.id)));
  return entries
    .filter((e) => e.dir === "recv" && e.frame && !e.frame.method && ids.has(JSON.stringify(e.frame.id)))
    .map((e) => e.frame.result ?? { error: e.frame.error });
}

/** Wait for the agent to have received its `n`-th elicitation response (1-based). */
export function waitForElicitationResult(file, n = 1, timeout = 30_000) {
  return waitFor(() => elicitationResults(file)[n - 1], { timeout, message: `elicitation response #${n} at the agent` });
}

// ---------------------------------------------------------------------------------------
// A remote agentctl behind a TCP proxy the test can cut (for the 503 case).

/** Start `agentctl serve` with a token; resolves `{url, token, stop()}`. */
export async function startRemoteAgentctl(env = {}) {
  const token = `t-${Math.random().toString(36).slice(2)}${Date.now()}`;
  const child = spawn(bins.agentctl, ["serve", "--listen", "127.0.0.1:0"], {
    env: { ...cleanEnv(), AGENTCTL_TOKEN: token, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = [];
  child.stderr.on("data", (d) => output.push(d.toString()));
  let buffered = "";
  child.stdout.on("data", (d) => (buffered += d.toString()));
  const addr = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`agentctl exited: ${output.join("")}`);
    const m = /AGENTCTL_LISTENING (\S+)/.exec(buffered);
    return m?.[1];
  }, { timeout: 15_000, message: "AGENTCTL_LISTENING" }).catch((err) => {
    child.kill("SIGKILL");
    throw err;
  });
  return {
    addr,
    token,
    logs: () => output.join(""),
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await once(child, "exit");
      }
    },
  };
}

/** A TCP proxy to `target` ("host:port") whose connections can be cut and refused. */
export async function startTcpProxy(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
  const sockets = new Set();
  let open = true;
  const server = net.createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = net.connect(port, host);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `ws://127.0.0.1:${server.address().port}`,
    /** Drop every connection and refuse new ones until `restore()`. */
    cut() {
      open = false;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    restore() {
      open = true;
    },
    close() {
      open = false;
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------------------------------
// Static UI server (also used alone for page-level tests with fixtures).

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

function serveFile(res, root, rel) {
  const file = path.resolve(root, `.${rel}`);
  if (!file.startsWith(root + path.sep) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end("not found");
    return;
  }
  res.writeHead(200, { "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream", "Cache-Control": "no-cache" });
  createReadStream(file).pipe(res);
}

/**
 * Serve apps/web/static at `/`, test pages at `/__test__/`, fixtures at `/__fixtures__/`;
 * with `backend`, proxy `/api/` and `/healthz` (including the WebSocket) to it.
 */
export async function startWebServer({ backend } = {}) {
  const target = backend ? new URL(backend) : null;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (target && (url.pathname.startsWith("/api/") || url.pathname === "/healthz")) {
      // Like a dev proxy's changeOrigin: kandev serves only its own Host and Origin.
      const headers = { ...req.headers, host: target.host, ...(req.headers.origin ? { origin: target.origin } : {}) };
      const upstream = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (up) => {
        res.writeHead(up.statusCode, up.headers);
        up.pipe(res);
      });
      upstream.on("error", (err) => res.writeHead(502).end(String(err)));
      req.pipe(upstream);
      return;
    }
    if (url.pathname.startsWith("/__test__/")) return serveFile(res, pagesDir, url.pathname.slice("/__test__".length));
    if (url.pathname.startsWith("/__fixtures__/")) return serveFile(res, fixturesDir, url.pathname.slice("/__fixtures__".length));
    return serveFile(res, staticDir, url.pathname === "/" ? "/index.html" : url.pathname);
  });
  const sockets = new Set();
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("upgrade", (req, socket, head) => {
    if (!target) return socket.destroy();
    const upstream = net.connect(Number(target.port), target.hostname, () => {
      const headers = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i].toLowerCase();
        const value = name === "host" ? target.host : name === "origin" ? target.origin : req.rawHeaders[i + 1];
        headers.push(`${req.rawHeaders[i]}: ${value}`);
      }
      upstream.write(`${req.method} ${req.url} HTTP/1.1\r\n${headers.join("\r\n")}\r\n\r\n`);
      upstream.write(head);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
    sockets.add(upstream);
    const drop = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

// ---------------------------------------------------------------------------------------
// The browser.

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launchBrowser() {
  const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (!existsSync(executablePath)) throw new Error(`chromium missing at ${executablePath}: run \`just web-deps\``);
  return chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
}

/** A page at `width`×`height` that fails the test on uncaught page errors (collected in `errors`). */
export async function newPage(browser, { width = 1280, height = 860, locale } = {}) {
  const context = await browser.newContext({ viewport: { width, height }, locale });
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (err) => page.errors.push(String(err)));
  page.on("console", (msg) => {
    // The optional agent list route may 404 (the UI falls back to a text field).
    if (msg.type() === "error" && !msg.location()?.url?.endsWith("/api/v1/agents")) {
      page.errors.push(`console: ${msg.text()} (${msg.location()?.url ?? "?"})`);
    }
  });
  return page;
}

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

/**
 * Run axe-core (every rule axe runs by default, best practices included) on the page as
 * it is now; returns its violations as readable lines (empty when clean).
 */
export async function axeViolations(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: axePath });
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  return result.violations.flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(" ")} — ${n.failureSummary?.split("\n").slice(0, 3).join(" ")}`));
}

/** Save a full-page screenshot as target/browser-screenshots/<name>.png. */
export async function screenshot(page, name) {
  mkdirSync(screenshotDir, { recursive: true });
  const file = path.join(screenshotDir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Run `body` with a started kandev and a browser page; always cleans up, prints logs on failure. */
export async function withKandev(options, body) {
  const kandev = await startKandev(options);
  let browser;
  try {
    browser = await launchBrowser();
    const page = await newPage(browser, options.viewport);
    await body({ kandev, page, browser });
  } catch (err) {
    process.stderr.write(`--- kandev log (tail) ---\n${kandev.logs().slice(-6000)}\n--- agent frames ---\n${readAgentLogTail(kandev.agentLog)}\n`);
    throw err;
  } finally {
    await browser?.close();
    await kandev.stop();
  }
}

function readAgentLogTail(file) {
  return readAgentLog(file).slice(-12).map((e) => `${e.dir} ${JSON.stringify(e.frame).slice(0, 400)}`).join("\n");
}

/**
 * One kandev and one browser for every test of a file (each test gets its own page):
 * for files whose tests do not read the shared agent log by position. Call at the top
 * level; `run(body, {viewport, locale})` runs a test body, printing kandev's log if it fails.
 */
export function sharedStack(options = {}) {
  const stack = {};
  before(async () => {
    stack.kandev = await startKandev(options);
    stack.browser = await launchBrowser();
  });
  after(async () => {
    await stack.browser?.close();
    await stack.kandev?.stop();
  });
  stack.run = async (body, { viewport, locale } = {}) => {
    const page = await newPage(stack.browser, { ...viewport, locale });
    try {
      await body({ kandev: stack.kandev, page, browser: stack.browser });
    } catch (err) {
      process.stderr.write(`--- kandev log (tail) ---\n${stack.kandev.logs().slice(-6000)}\n--- agent frames ---\n${readAgentLogTail(stack.kandev.agentLog)}\n`);
      throw err;
    } finally {
      await page.context().close();
    }
  };
  return stack;
}

/** Skip every question still waiting (a shared stack's tests start from none). */
export async function skipAllPending(kandev) {
  const pending = await kandev.api.call("GET", "/api/v1/clarifications?status=pending").then((b) => b.clarifications);
  for (const r of pending) {
    await kandev.api.call("POST", `/api/v1/clarifications/${r.pending_id}/respond`, { answers: [], rejected: true, reject_reason: "skipped" }).catch(() => {});
  }
}
