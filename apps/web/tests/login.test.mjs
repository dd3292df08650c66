// The sign-in page in headless chromium against a real kandev requiring operators
// (docs/architecture.md §10): nothing but the form without a session, a wrong token refused, the
// right one exchanged for an HttpOnly SameSite=Strict cookie that script cannot read and
// that opens the board and its WebSocket, and sign-out back to the form.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { test } from "node:test";
import { screenshot, waitFor, withKandev } from "./harness.mjs";

const T = { timeout: 120_000 };
const token = `kdv_${randomBytes(32).toString("hex")}`;
const AUTH = [
  "[auth]",
  "required = true",
  "[[auth.operators]]",
  'name = "alice"',
  `token_sha256 = "${createHash("sha256").update(token).digest("hex")}"`,
].join("\n");

/** Page errors other than the 401s this page is expected to meet. */
function unexpected(errors) {
  return errors.filter((e) => !(e.startsWith("console:") && /401|Unauthorized/.test(e)));
}

test("sign-in: form without a session, wrong token refused, right token opens the board, sign-out", T, async () => {
  await withKandev({ toml: AUTH }, async ({ kandev, page }) => {
    const context = page.context();
    await page.goto(`${kandev.url}/#/`);
    const form = page.getByTestId("login-form");
    await form.waitFor();
    assert.equal(await page.getByTestId("task-list").count(), 0, "no board before sign-in");
    const anonymous = await fetch(`${kandev.apiUrl}/api/v1/tasks`);
    assert.equal(anonymous.status, 401, "the API is closed without credentials");
    await screenshot(page, "login-form");

    await page.getByTestId("login-token").fill("kdv_wrong");
    await page.getByTestId("login-submit").click();
    await waitFor(async () => /not valid/.test(await page.getByTestId("login-error").textContent()), { message: "the refusal" });
    assert.equal(await page.getByTestId("login-token").getAttribute("aria-invalid"), "true");
    assert.deepEqual((await context.cookies()).filter((c) => c.name === "kandev_session"), [], "no cookie for a wrong token");
    await screenshot(page, "login-wrong-token");

    await page.getByTestId("login-token").fill(token);
    await page.getByTestId("login-submit").click();
    await page.getByTestId("task-list").waitFor({ state: "attached" });
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
    assert.match(await page.getByTestId("operator").textContent(), /Signed in as alice/);
    const [cookie] = (await context.cookies()).filter((c) => c.name === "kandev_session");
    assert.ok(cookie, "the session cookie is set");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.ok(!cookie.value.includes(token), "the cookie is not the token");
    assert.equal(await page.evaluate(() => document.cookie.includes("kandev_session")), false, "script cannot read it");
    assert.equal(await page.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)).then((s) => s.includes(token)), false, "the token is not kept");

    // The board's WebSocket is authenticated by the cookie: a task made elsewhere shows up live.
    const created = await fetch(`${kandev.apiUrl}/api/v1/tasks`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
      body: JSON.stringify({ title: "Made by an API client" }),
    });
    assert.equal(created.status, 201);
    const { id } = await created.json();
    await page.locator(`[data-testid=task-row][data-task-id="${id}"]`).waitFor();
    await screenshot(page, "login-signed-in-board");

    await page.getByTestId("sign-out").click();
    await form.waitFor();
    assert.deepEqual((await context.cookies()).filter((c) => c.name === "kandev_session"), [], "signed out");
    await page.reload();
    await form.waitFor();
    assert.deepEqual(unexpected(page.errors), []);
  });
});
