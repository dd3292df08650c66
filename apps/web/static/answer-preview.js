// "The agent will receive: …" above Submit: the `content` agentctl will send, built by the
// same rule (answer-rules.js `deliveredContent`), kept current as the operator answers.
// Secret values are masked here as everywhere on screen. Elicitation only: an
// ask_user_question answer goes back through its tool, not as ACP content.

import { deliveredContent, maskedContent } from "./answer-rules.js";
import { h, replace } from "./dom.js";
import { t } from "./i18n.js";

/** `{element, update(payload)}` for the questions of one record. */
export function answerPreview(questions) {
  const value = h("code", { class: "preview-content", translate: "no", "data-testid": "clarification-preview-content" });
  const element = h("p", { class: "answer-preview", "data-testid": "clarification-preview", "aria-live": "off" });
  return {
    element,
    update(payload) {
      const content = deliveredContent(questions, payload);
      const shown = maskedContent(questions, content);
      element.dataset.content = JSON.stringify(shown);
      element.dataset.empty = String(Object.keys(content).length === 0);
      if (Object.keys(content).length === 0) {
        replace(element, t("clar.preview.nothing"));
        return;
      }
      value.textContent = JSON.stringify(shown);
      replace(element, t("clar.preview.label"), " ", value);
    },
  };
}
