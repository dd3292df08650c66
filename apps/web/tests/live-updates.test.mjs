// Updates in place (issue 16 item 6): WebSocket payloads are applied to what they name,
// nothing is refetched between (re)connects, and focus and typed text survive every
// event. The mock agent streams text and tool-call updates while its question waits
// (tests/fixtures/scenarios/stream-while-asking.json). Streamed text arrives as
// `message.appended` events (tests/fixtures/scenarios/stream-chunks.json).

import assert from "node:assert/strict";
import { test } from "node:test";
import { screenshot, sessionWithPendingClarification, sharedStack, waitFor, waitForElicitationResult } from "./harness.mjs";

const T = { timeout: 120_000 };
// One stack for both tests: only the first answers a question, so the agent log's first
// elicitation result is its own whatever runs alongside.
const stack = sharedStack({ env: { KANDEV_FEATURES_ACP_ELICITATION: "true" } });

/** Wait until the page is online and its loads have settled (the socket does not count). */
async function settled(page) {
  await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
  await page.waitForLoadState("networkidle");
}

/** Count the GETs of the page whose path matches `re`, from now on. */
function countRequests(page, re) {
  const seen = [];
  page.on("request", (req) => {
    const url = new URL(req.url());
    if (req.method() === "GET" && re.test(url.pathname)) seen.push(url.pathname + url.search);
  });
  return seen;
}

test("session: typing an answer while the agent streams keeps focus and text; events are applied, never refetched", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:stream-while-asking", "Stream while asking");
    await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(session.id)}`);
    const notes = page.getByTestId("clarification-custom-notes");
    await notes.waitFor();
    await settled(page);
    // The question's text keeps its line breaks and its markdown (text.js).
    const message = page.locator(".clar-message");
    assert.equal(await message.locator("strong").textContent(), "laptop");
    assert.deepEqual(await message.locator("li").allTextContents(), ["no server process", "file: URLs are fine"]);
    const refetches = countRequests(page, /\/messages$|^\/api\/v1\/clarifications$|^\/api\/v1\/sessions\/[^/]+$/);
    const streamed = page.getByTestId("message-agent").filter({ hasText: "Still indexing" });
    const streamedLength = async () => (await streamed.allTextContents()).join("").length;
    await streamed.first().waitFor({ timeout: 15_000 });
    const before = await streamedLength();

    await notes.click();
    const typed = "Keep it in one file, please.";
    await page.keyboard.type(typed, { delay: 35 });
    const after = await streamedLength();
    assert.ok(after > before, `the agent's text grew while typing (${before} → ${after} chars)`);
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "clarification-custom-notes", "focus stayed in the field");
    assert.equal(await notes.inputValue(), typed, "every typed character kept");

    // The tool call the question belongs to was updated in place (its title grew).
    await page.getByTestId("message-tool-call").filter({ hasText: "files read" }).first().waitFor({ timeout: 15_000 });
    assert.deepEqual(refetches, [], "nothing refetched while events stream");
    await screenshot(page, "session-streaming-while-asking");

    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    assert.deepEqual(await waitForElicitationResult(kandev.agentLog), {
      action: "accept",
      content: { question_0: "SQLite", notes: typed },
    });
    assert.deepEqual(page.errors, []);
  });
});

test("board: an event patches only its task's row; another row keeps its node, open form, focus and typed text", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const first = await kandev.api.createTask("Row that changes");
    const second = await kandev.api.createTask("Row being typed in");
    await page.goto(`${kandev.url}/#/`);
    await settled(page);
    const taskFetches = countRequests(page, /^\/api\/v1\/tasks/);
    const rowOf = (task) => page.locator(`[data-testid=task-row][data-task-id="${task.id}"]`);
    await rowOf(first).waitFor();
    await rowOf(second).waitFor();
    // Tag both row nodes: a rebuilt row would lose its tag.
    await page.evaluate(() => document.querySelectorAll("[data-testid=task-row]").forEach((el) => { el.kandevTag = el.dataset.taskId; }));
    const prompt = rowOf(second).getByTestId("start-prompt");
    await prompt.click();
    await page.keyboard.type("/e2e:plain half-typed", { delay: 10 });

    await kandev.api.startSession(first.id, "/e2e:single");
    await rowOf(first).getByTestId("task-state-waiting-for-input").waitFor({ timeout: 20_000 });
    await rowOf(first).getByTestId("open-session").and(page.getByText("Answer now")).waitFor();

    const tags = await page.evaluate(() => [...document.querySelectorAll("[data-testid=task-row]")].map((el) => [el.dataset.taskId, el.kandevTag]));
    const tagOf = Object.fromEntries(tags);
    assert.equal(tagOf[first.id], first.id, "the updated row is the same node");
    assert.equal(tagOf[second.id], second.id, "the other row is the same node");
    assert.ok(tags.every(([id, tag]) => id === tag), "no row was rebuilt");
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "start-prompt");
    assert.equal(await prompt.inputValue(), "/e2e:plain half-typed");
    assert.deepEqual(taskFetches, [], "no task is refetched; events carry the rows");
    await screenshot(page, "board-row-updated-in-place");
    assert.deepEqual(page.errors, []);
  });
});

/** A session of a new task with no turn yet, its page open and settled; `route(session)` (optional) gives the handler between the page and the socket. */
async function idleSession(kandev, page, title, route) {
  const task = await kandev.api.createTask(title, "Browser test: streamed text");
  const session = await kandev.api.startSession(task.id);
  if (route) await page.routeWebSocket(/\/api\/v1\/ws(\?|$)/, route(session));
  await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(session.id)}`);
  await page.getByTestId("session-view").waitFor();
  await settled(page);
  return session;
}

/** Play stream-chunks in `session` and wait for the turn's end; the agent's streamed message as stored. */
async function streamed(kandev, session) {
  await kandev.api.call("POST", `/api/v1/sessions/${session.id}/prompt`, { text: "/e2e:stream-chunks" });
  await waitFor(async () => (await kandev.api.session(session.id)).state === "IDLE", { timeout: 30_000, message: "the streamed turn's end" });
  const messages = await kandev.api.messages(session.id);
  const message = messages.find((m) => m.author_type === "agent" && m.type === "message");
  assert.ok(message?.content.endsWith("400:wörd 🙂 The end."), JSON.stringify(message));
  return message;
}

const squash = (text) => text.replace(/\s+/g, " ").trim();

/** The page shows `message` in full (waits for its last words). */
async function showsInFull(page, message) {
  const shown = page.locator(`[data-message-id="${message.id}"] .msg-body`);
  await shown.filter({ hasText: "The end." }).waitFor({ timeout: 15_000 });
  assert.equal(squash(await shown.textContent()), squash(message.content));
}

test("session: streamed text arrives as appends to the message shown, never refetched", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const frames = [];
    page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push(JSON.parse(String(f.payload)))));
    const session = await idleSession(kandev, page, "Streamed answer");
    const refetches = countRequests(page, /\/messages$/);
    const message = await streamed(kandev, session);
    await showsInFull(page, message);
    const mine = frames.filter((e) => e.data?.id === message.id);
    const appends = mine.filter((e) => e.type === "message.appended");
    assert.ok(appends.length >= 1, `appends: ${appends.length}`);
    assert.ok(appends.every((e) => e.data.content === undefined && typeof e.data.text === "string"), "appends carry text, not content");
    assert.equal(appends.at(-1).data.length, message.content.length, "length in UTF-16 units, a JS string's length");
    assert.deepEqual(mine.filter((e) => e.type === "message.updated"), [], "no whole-message update for streamed text");
    assert.deepEqual(refetches, [], "appends applied in place, nothing refetched");
    assert.deepEqual(page.errors, []);
  });
});

test("board: a page that shows no session gets no transcript events; a session page gets its own from the watch on", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const frames = [];
    page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push(JSON.parse(String(f.payload)))));
    const task = await kandev.api.createTask("Watched from the board", "Browser test: transcripts");
    const session = await kandev.api.startSession(task.id);
    await page.goto(`${kandev.url}/#/`);
    await settled(page);
    // The board connects watching none (`?watch=`): its first frame is that watch's
    // acknowledgement, and no transcript reaches it at all, even while other tests' sessions
    // of the shared stack stream.
    await waitFor(() => frames.length > 0, { message: "the board's first frame" });
    assert.deepEqual(frames[0], { type: "watching", data: { sessions: [] } });
    const message = await streamed(kandev, session);
    // The turn's end reaches the board after every message of it: a barrier.
    const states = () => frames.filter((e) => e.type === "session.updated" && e.data?.id === session.id).map((e) => e.data.state);
    await waitFor(() => states().includes("RUNNING") && states().at(-1) === "IDLE", { message: "the turn's end on the board" });
    const onBoard = frames.filter((e) => e.type?.startsWith("message."));
    assert.deepEqual(onBoard.map((e) => `${e.type} ${e.data?.session_id}`), [], "the board follows no transcript");
    assert.deepEqual(frames.filter((e) => e.type === "watching").at(-1)?.data, { sessions: [] });

    await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(session.id)}`);
    await waitFor(() => frames.some((e) => e.type === "watching" && e.data?.sessions?.includes(session.id)), { message: "the session's watch acknowledged" });
    await showsInFull(page, message);
    await kandev.api.call("POST", `/api/v1/sessions/${session.id}/prompt`, { text: "/e2e:stream-chunks" });
    await waitFor(() => frames.some((e) => e.type === "message.appended" && e.data?.session_id === session.id), { timeout: 30_000, message: "its transcript's appends" });
    assert.deepEqual(page.errors, []);
  });
});

test("session: an append that does not fit the message shown reloads the messages instead of showing wrong text", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    // The session's first append reaches the page one character short, as if text was
    // missed (other sessions of the shared stack may be streaming too).
    let corrupted = 0;
    const session = await idleSession(kandev, page, "Missed append", ({ id }) => (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => server.send(m));
      server.onMessage((m) => {
        const event = JSON.parse(String(m));
        const mine = event.type === "message.appended" && event.data.session_id === id;
        if (mine && corrupted === 0 && event.data.text.length > 1) {
          corrupted += 1;
          event.data.text = event.data.text.slice(1);
          return ws.send(JSON.stringify(event));
        }
        ws.send(m);
      });
    });
    const refetches = countRequests(page, /\/messages$/);
    const message = await streamed(kandev, session);
    await showsInFull(page, message);
    assert.equal(corrupted, 1);
    assert.ok(refetches.length >= 1, "the messages were reloaded");
    assert.deepEqual(page.errors, []);
  });
});
