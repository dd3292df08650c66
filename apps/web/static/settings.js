// Settings (`#/settings`): the runtime flags with what they are, where their value comes
// from, and a toggle that PATCHes an override. Env-locked flags say why they are locked.

import { alertPrefs, chime, desktopAlertState, setDesktopAlerts, setSoundAlerts } from "./alerts.js";
import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { t, has } from "./i18n.js";
import { coalesce } from "./refresh.js";
import * as ws from "./ws.js";
import { webhooksSection } from "./webhooks.js";

let refocus = null; // test id of the toggle that had focus when its change was saved

function sourceLabel(source) {
  const key = `settings.source.${source}`;
  return has(key) ? t(key) : source;
}

/** A catalogue word for a known value (`settings.stabilityValue.beta`), else the value itself. */
function word(prefix, value) {
  const key = `${prefix}.${value}`;
  return has(key) ? t(key) : value ?? "?";
}

function slug(key) {
  return key.replace(/[^A-Za-z0-9_-]/g, "-");
}

/**
 * One flag's row. `notes` holds each flag's status line by key, so a "Saved" survives a
 * re-render that lands while its PATCH is still in flight.
 */
function flagRow(flag, notes, onChange) {
  const id = `flag-${slug(flag.key)}`;
  const descId = `${id}-desc`;
  const lockId = `${id}-lock`;
  const locked = flag.locked || flag.source === "env";
  const disabled = locked || flag.mutable === false;
  const reason = locked ? t("settings.lockedEnv", { env: flag.env_var }) : flag.mutable === false ? t("settings.immutable") : null;
  const status = h("p", { class: "form-status", role: "status", "data-testid": `flag-status-${flag.key}` }, notes.get(flag.key) ?? "");
  const say = (text) => {
    notes.set(flag.key, text);
    status.textContent = text;
  };
  const onOff = (value) => (value ? t("settings.on") : t("settings.off"));
  const shownValue = h("span", { class: "flag-value", "data-testid": `flag-value-${flag.key}` }, onOff(flag.value));
  const toggle = h("input", {
    type: "checkbox",
    role: "switch",
    id,
    class: "switch",
    checked: flag.value === true,
    disabled,
    "aria-describedby": [descId, reason ? lockId : null].filter(Boolean).join(" "),
    "data-testid": `flag-toggle-${flag.key}`,
  });
  toggle.addEventListener("change", async () => {
    const wanted = toggle.checked;
    // Disabling a focused control drops focus to <body>: say where it belongs afterwards.
    if (document.activeElement === toggle) refocus = toggle.dataset.testid;
    toggle.disabled = true;
    try {
      const updated = await api.setFlag(flag.key, wanted);
      const value = updated?.value ?? wanted;
      // The row says what was saved at once, not only after the re-read rebuilds it.
      shownValue.textContent = onOff(value);
      say(t("settings.saved", { value: onOff(value) }));
    } catch (err) {
      toggle.checked = !wanted;
      say(t("common.error", { message: err.message }));
    } finally {
      toggle.disabled = disabled;
      onChange();
    }
  });
  const reset = flag.source === "override" && !disabled
    ? h("button", { type: "button", class: "link", "data-testid": `flag-reset-${flag.key}` }, t("settings.reset"))
    : null;
  reset?.addEventListener("click", async () => {
    try {
      await api.setFlag(flag.key, null);
    } catch (err) {
      say(t("common.error", { message: err.message }));
    }
    onChange();
  });
  return h("li", { class: `flag${disabled ? " locked" : ""}`, "data-testid": `flag-${flag.key}`, "data-source": flag.source },
    h("div", { class: "flag-main" },
      // The registry's English text is the fallback for a flag the catalogue does not know yet.
      h("label", { for: id, class: "flag-label" }, has(`flag.${flag.key}.label`) ? t(`flag.${flag.key}.label`) : flag.label ?? flag.key),
      h("p", { class: "flag-desc", id: descId }, has(`flag.${flag.key}.description`) ? t(`flag.${flag.key}.description`) : flag.description ?? ""),
      h("p", { class: "flag-meta" },
        h("span", { class: `pill pill-stability-${flag.stability}` }, t("settings.stability", { stability: word("settings.stabilityValue", flag.stability) })),
        h("span", { class: `pill pill-risk-${flag.risk_level}` }, t("settings.risk", { risk: word("settings.riskValue", flag.risk_level) })),
        h("span", { class: "pill", "data-testid": `flag-source-${flag.key}` }, t("settings.source", { source: sourceLabel(flag.source) })),
        h("code", { class: "env" }, flag.env_var ?? flag.key)),
      reason ? h("p", { class: "flag-lock", id: lockId, "data-testid": `flag-lock-${flag.key}` }, reason) : null,
      flag.restart_required ? h("p", { class: "hint" }, t("settings.restartRequired")) : null,
      status),
    h("div", { class: "flag-control" },
      shownValue,
      toggle,
      reset));
}

/** A switch with its label, description and status line. */
function alertSwitch({ key, label, desc, checked, onToggle }) {
  const id = `alerts-${key}`;
  const status = h("p", { class: "form-status", role: "status", "data-testid": `alerts-${key}-status` });
  const toggle = h("input", { type: "checkbox", role: "switch", id, class: "switch", checked, "aria-describedby": `${id}-desc`, "data-testid": `alerts-${key}` });
  toggle.addEventListener("change", () => onToggle(toggle, status));
  return {
    status,
    element: h("li", { class: "flag" },
      h("div", { class: "flag-main" },
        h("label", { for: id, class: "flag-label" }, label),
        h("p", { class: "flag-desc", id: `${id}-desc` }, desc),
        status),
      h("div", { class: "flag-control" }, toggle)),
  };
}

/** "Alerts on this device": desktop notifications (with the permission flow) and the chime. */
function alertsSection() {
  const desktop = alertSwitch({
    key: "desktop",
    label: t("alerts.desktop"),
    desc: t("alerts.desktopDesc"),
    checked: desktopAlertState() === "on",
    async onToggle(toggle, status) {
      toggle.disabled = true;
      if (toggle.checked) status.textContent = t("alerts.status.asking");
      const state = await setDesktopAlerts(toggle.checked);
      toggle.checked = state === "on";
      toggle.disabled = state === "unsupported";
      status.textContent = t(`alerts.status.${state}`);
    },
  });
  const initial = desktopAlertState();
  if (initial === "unsupported" || initial === "denied") desktop.status.textContent = t(`alerts.status.${initial}`);
  const sound = alertSwitch({
    key: "sound",
    label: t("alerts.sound"),
    desc: t("alerts.soundDesc"),
    checked: alertPrefs().sound,
    onToggle(toggle, status) {
      setSoundAlerts(toggle.checked);
      status.textContent = toggle.checked ? t("alerts.status.soundOn") : t("alerts.status.soundOff");
      if (toggle.checked) chime(); // what it sounds like (and a gesture that unlocks audio)
    },
  });
  return h("section", { class: "card", "aria-labelledby": "alerts-h", "data-testid": "alerts-settings" },
    h("h2", { id: "alerts-h" }, t("alerts.heading")),
    h("p", { class: "note" }, t("alerts.intro")),
    h("ul", { class: "flags" }, desktop.element, sound.element));
}

/** Mount Settings into `root`; returns the unmount function. */
export function mountSettings(root) {
  const list = h("ul", { class: "flags", "data-testid": "flag-list" });
  const status = h("p", { class: "muted" }, t("common.loading"));
  const notes = new Map();
  let shown = null; // the flags and status lines the list was last built from
  const load = coalesce(async () => {
    list.setAttribute("aria-busy", "true");
    try {
      const flags = await api.listFlags();
      status.hidden = flags.length > 0;
      status.textContent = flags.length ? "" : t("settings.empty");
      // A toggle re-reads the list: its focus survives the re-render (its status line is in `notes`).
      const focused = refocus ?? (list.contains(document.activeElement) ? document.activeElement.dataset.testid : null);
      refocus = null;
      // A re-read that changes nothing (a reconnect's) keeps the rows: rebuilding them would
      // drop a key press that is half done on a toggle.
      const next = JSON.stringify([flags, [...notes]]);
      if (next !== shown) {
        shown = next;
        replace(list, flags.map((f) => flagRow(f, notes, load)));
      }
      if (focused) list.querySelector(`[data-testid="${CSS.escape(focused)}"]`)?.focus();
    } catch (err) {
      status.hidden = false;
      status.textContent = t("common.error", { message: err.message });
    } finally {
      list.removeAttribute("aria-busy");
    }
  });
  replace(root,
    h("div", { class: "settings" },
      h("h1", {}, t("settings.heading")),
      h("section", { class: "card", "aria-labelledby": "flags-h" },
        h("h2", { id: "flags-h" }, t("settings.flags")),
        h("p", { class: "note", "data-testid": "settings-applies-next" }, t("settings.appliesNext")),
        status,
        list),
      alertsSection(),
      webhooksSection()));
  const offs = [ws.onStatus((up) => up && load()), ws.on("runtime_flags.updated", load)];
  load();
  return () => offs.forEach((off) => off());
}
