// Settings: the configured outbound webhooks (README "Reaching the operator") and what became
// of each one's latest delivery. Read only: hooks are configured in kandev.toml.

import { h, replace, timeEl } from "./dom.js";
import { t } from "./i18n.js";

function describe(last) {
  if (!last) return t("webhooks.none");
  const parts = [t("webhooks.last", { event: last.event, status: t(`webhooks.status.${last.status}`) })];
  if (last.attempts > 1) parts.push(t("webhooks.attempts", { count: last.attempts }));
  if (last.last_status) parts.push(`HTTP ${last.last_status}`);
  if (last.last_error && last.status !== "delivered") parts.push(last.last_error);
  return parts.join(" · ");
}

function hookRow(hook) {
  const last = hook.last_delivery;
  const at = last?.finished_at ?? last?.created_at;
  return h("li", { class: "flag", "data-testid": "webhook-row", "data-hook": hook.name, "data-status": last?.status ?? "none" },
    h("strong", {}, hook.name),
    h("p", { class: "hint" }, `${hook.format} · ${hook.events.join(", ")}`),
    h("p", { class: "webhook-last" }, describe(last), at ? [" · ", timeEl(at)] : null));
}

/** The Settings card listing the webhooks; hidden when none is configured. */
export function webhooksSection() {
  const list = h("ul", { class: "flags", "data-testid": "webhook-list" });
  const section = h("section", { class: "card", "aria-labelledby": "webhooks-h", "data-testid": "webhook-settings", hidden: true },
    h("h2", { id: "webhooks-h" }, t("webhooks.heading")),
    h("p", { class: "note" }, t("webhooks.intro")),
    list);
  fetch("/api/v1/notifications/webhooks", { headers: { Accept: "application/json" } })
    .then((res) => (res.ok ? res.json() : { webhooks: [] }))
    .then(({ webhooks = [] }) => {
      section.hidden = webhooks.length === 0;
      replace(list, webhooks.map(hookRow));
    })
    .catch(() => {});
  return section;
}
