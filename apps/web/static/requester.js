// Who asks (ACP v1: identify the requester): the agent as configured (its id) and as it
// named itself in ACP `initialize` (`agentInfo`), and the tool call the request belongs
// to when it carries a `toolCallId`, with a control that shows that tool call in the chat.

import { h } from "./dom.js";
import { t } from "./i18n.js";

/** The agent in words: "mock (mock-agent 0.3.0)", or the id alone without agentInfo. */
export function agentLabel(agent, info) {
  const id = agent ?? "?";
  const name = info?.title || info?.name;
  if (!name) return id;
  const named = info.version ? t("clar.agentVersion", { name, version: info.version }) : name;
  return named === id ? id : t("clar.agentNamed", { id, name: named });
}

/**
 * The MCP server a form came through, when its tool call says so: Claude names an MCP
 * tool `mcp__<server>__<tool>` (in the title, or `_meta.claudeCode.toolName`), and an
 * MCP server's elicitation is forwarded inside that tool call. Null otherwise.
 */
export function mcpServerOf(message) {
  const meta = message?.metadata ?? {};
  const names = [meta.title, message?.content, meta.tool_name, meta.raw?._meta?.claudeCode?.toolName, meta._meta?.claudeCode?.toolName];
  for (const name of names) {
    const m = typeof name === "string" ? /^mcp__(.+?)__./.exec(name.trim()) : null;
    if (m) return m[1];
  }
  return null;
}

/**
 * The requester line for `record`. `context` is `{agent, agentInfo, toolCall(id) → message
 * or null, showToolCall(id)}`; any part may be missing.
 */
export function requesterLine(record, context = {}) {
  const parts = [t("clar.askedBy", { agent: agentLabel(context.agent, context.agentInfo) })];
  const toolCallId = record.tool_call_id;
  let show = null;
  if (toolCallId) {
    const message = context.toolCall?.(toolCallId) ?? null;
    const title = message ? message.content || message.metadata?.title : null;
    const server = mcpServerOf(message);
    if (server) parts.push(" ", t("clar.throughMcp", { server }));
    parts.push(" ", title ? t("clar.forToolCall", { title }) : t("clar.forToolCallId", { id: toolCallId }));
    if (message && context.showToolCall) {
      show = h("button", { type: "button", class: "link", "data-testid": "clarification-show-tool-call", "data-tool-call-id": toolCallId }, t("clar.showToolCall"));
      show.addEventListener("click", () => context.showToolCall(toolCallId));
    }
  }
  return h("p", { class: "requester", "data-testid": "clarification-requester", "data-tool-call-id": toolCallId ?? "", "data-mcp-server": mcpServerOf(toolCallId ? context.toolCall?.(toolCallId) : null) ?? "" },
    parts, show ? [" ", show] : null);
}
