// Settings shows each configured webhook with what became of its latest delivery, as the
// outbox recorded it: delivered, given up after its attempts, or nothing sent yet. The
// receivers are local HTTP servers; the deliveries are real.

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { sessionWithPendingClarification, waitFor, withKandev } from "./harness.mjs";

const FLAG_ON = { KANDEV_FEATURES_ACP_ELICITATION: "true" };

/** A local receiver: `/ok` answers 200, anything else 500. Resolves to its base URL and server. */
async function receiver() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.statusCode = req.url === "/ok" ? 200 : 500;
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

function hooks(url) {
  const hook = (name, path, events) => [
    "[[notifications.webhooks]]",
    `name = "${name}"`,
    `url = "${url}${path}"`,
    `secret = "${name}-browser-test-secret"`,
    `events = [${events.map((e) => `"${e}"`).join(", ")}]`,
  ].join("\n");
  return [
    "[notifications]",
    'retry_delay = "50ms"',
    "max_attempts = 2",
    "",
    hook("team", "/ok", ["clarification_requested"]),
    hook("pager", "/fail", ["clarification_requested"]),
    // Fires when the turn ends; the question keeps it open, so nothing is sent.
    hook("quiet", "/ok", ["turn_finished"]),
  ].join("\n");
}

test("Settings: each webhook with its last delivery, delivered, given up or none yet", { timeout: 120_000 }, async () => {
  const { server, url } = await receiver();
  try {
    await withKandev({ env: FLAG_ON, toml: hooks(url) }, async ({ kandev, page }) => {
      await sessionWithPendingClarification(kandev, "/e2e:single", "Choose the datastore");
      const lastOf = async () => {
        const res = await fetch(`${kandev.url}/api/v1/notifications/webhooks`);
        const { webhooks } = await res.json();
        return Object.fromEntries(webhooks.map((w) => [w.name, w.last_delivery?.status ?? "none"]));
      };
      await waitFor(async () => {
        const last = await lastOf();
        return last.team === "delivered" && last.pager === "failed" ? last : null;
      }, { timeout: 30_000, message: "team delivered and pager given up" });

      await page.goto(`${kandev.url}/#/settings`);
      const row = (name) => page.locator(`[data-testid="webhook-row"][data-hook="${name}"]`);
      await row("quiet").waitFor();
      assert.equal(await row("team").getAttribute("data-status"), "delivered");
      const team = await row("team").textContent();
      assert.match(team, /clarification_requested: delivered/);
      assert.match(team, /HTTP 200/);
      assert.match(team, /json · clarification_requested/);

      assert.equal(await row("pager").getAttribute("data-status"), "failed");
      const pager = await row("pager").textContent();
      assert.match(pager, /clarification_requested: failed/);
      assert.match(pager, /2 attempts/);
      assert.match(pager, /HTTP 500/);

      assert.equal(await row("quiet").getAttribute("data-status"), "none");
      assert.match(await row("quiet").textContent(), /No delivery yet\./);
      // The page names no secret.
      assert.doesNotMatch(await page.getByTestId("webhook-settings").textContent(), /browser-test-secret/);
      assert.deepEqual(page.errors, []);
    });
  } finally {
    server.close();
  }
});
