// node --test e2e/foreign-agent/
import assert from "node:assert/strict";
import { test } from "node:test";
import { parsePrompt } from "./prompt.mjs";

test("ask <set> uses the default bridge", () => {
  assert.deepEqual(parsePrompt("ask mixed", "0.65.0"), { set: "mixed", version: "0.65.0" });
  assert.deepEqual(parsePrompt("  ask single  ", "0.101.0"), { set: "single", version: "0.101.0" });
});

test("bridge=<version> overrides it for the turn", () => {
  assert.deepEqual(parsePrompt("ask single bridge=0.101.0", "0.65.0"), { set: "single", version: "0.101.0" });
});

test("anything else is not an ask", () => {
  for (const text of ["", "hello", "ask", "ask a b", "/e2e:single", "please ask single"]) {
    assert.equal(parsePrompt(text, "0.65.0"), null, text);
  }
});
