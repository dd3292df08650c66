// Agent text that reads well: line breaks kept, and a safe markdown subset — emphasis,
// strong, inline and fenced code, bullet and numbered lists — built with DOM APIs from a
// parsed tree, never innerHTML of agent text. Links are shown as text with their URL
// ("label (https://…)"), never as anchors: an agent cannot make the operator click.

import { h } from "./dom.js";

const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const FENCE = /^\s{0,3}(```|~~~)/;
const HEADING = /^\s{0,3}#{1,6}\s+(.*)$/;

/**
 * The blocks of `text`: `{type: "p", text}` (its single line breaks kept), `{type: "ul",
 * items}`, `{type: "ol", start, items}`, `{type: "code", text}` (verbatim), `{type: "h", text}`.
 */
export function parseBlocks(text) {
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let para = null;
  let list = null;
  const close = () => {
    para = null;
    list = null;
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      close();
      const body = [];
      for (i += 1; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i += 1) body.push(lines[i]);
      blocks.push({ type: "code", text: body.join("\n") });
      continue;
    }
    if (line.trim() === "") {
      close();
      continue;
    }
    const bullet = BULLET.exec(line);
    const numbered = bullet ? null : NUMBERED.exec(line);
    if (bullet || numbered) {
      const type = bullet ? "ul" : "ol";
      if (!list || list.type !== type) {
        para = null;
        list = type === "ol" ? { type, start: Number(numbered[1]), items: [] } : { type, items: [] };
        blocks.push(list);
      }
      list.items.push(bullet ? bullet[1] : numbered[2]);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      close();
      blocks.push({ type: "h", text: heading[1] });
      continue;
    }
    if (list && /^\s{2,}\S/.test(line)) {
      // An indented line continues the list item above it.
      list.items[list.items.length - 1] += `\n${line.trim()}`;
      continue;
    }
    if (!para) {
      list = null;
      para = { type: "p", text: line };
      blocks.push(para);
    } else {
      para.text += `\n${line}`;
    }
  }
  return blocks;
}

// Code first (nothing inside it is markup), then links, strong, emphasis. `_` only counts
// at word edges, so snake_case names stay as they are.
const INLINE = /(`+)([^`][\s\S]*?)\1(?!`)|\[([^\]\n]+)\]\(\s*(<[^>\n]*>|[^\s)]+)\s*\)|\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__(?![\p{L}\p{N}])|\*(?=[^\s*])([\s\S]*?[^\s*])\*|(?<![\p{L}\p{N}_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\p{L}\p{N}_])/u;

/**
 * The inline spans of `text`: `{type: "text", text}`, `{type: "code", text}`,
 * `{type: "strong"|"em", children}`, `{type: "link", children, url}`.
 */
export function parseInline(text) {
  const out = [];
  let rest = String(text ?? "");
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) {
      out.push({ type: "text", text: rest });
      break;
    }
    if (m.index > 0) out.push({ type: "text", text: rest.slice(0, m.index) });
    if (m[1]) out.push({ type: "code", text: m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2] });
    else if (m[3] !== undefined) out.push({ type: "link", children: parseInline(m[3]), url: m[4].replace(/^<|>$/g, "") });
    else if (m[5] !== undefined || m[6] !== undefined) out.push({ type: "strong", children: parseInline(m[5] ?? m[6]) });
    else out.push({ type: "em", children: parseInline(m[7] ?? m[8]) });
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function inlineNodes(spans) {
  return spans.map((s) => {
    switch (s.type) {
      case "code":
        return h("code", {}, s.text);
      case "strong":
        return h("strong", {}, inlineNodes(s.children));
      case "em":
        return h("em", {}, inlineNodes(s.children));
      case "link":
        return h("span", { class: "md-link" }, inlineNodes(s.children), " (", h("span", { class: "md-url" }, s.url), ")");
      default:
        return s.text;
    }
  });
}

/** `text` as inline nodes only (for places where blocks cannot go, such as a label). */
export function richInline(text) {
  return inlineNodes(parseInline(text));
}

/** `text` as DOM nodes (for a container with class `rich`). */
export function richNodes(text) {
  return parseBlocks(text).map((b) => {
    switch (b.type) {
      case "code":
        return h("pre", {}, h("code", {}, b.text));
      case "ul":
        return h("ul", {}, b.items.map((item) => h("li", {}, inlineNodes(parseInline(item)))));
      case "ol":
        return h("ol", { start: b.start === 1 ? null : String(b.start) }, b.items.map((item) => h("li", {}, inlineNodes(parseInline(item)))));
      case "h":
        return h("p", { class: "md-heading" }, h("strong", {}, inlineNodes(parseInline(b.text))));
      default:
        return h("p", {}, inlineNodes(parseInline(b.text)));
    }
  });
}

/** A `tag` (div by default) with class `rich` holding `text` rendered. */
export function rich(text, attrs = {}, tag = "div") {
  return h(tag, { ...attrs, class: `rich${attrs.class ? ` ${attrs.class}` : ""}` }, richNodes(text));
}
