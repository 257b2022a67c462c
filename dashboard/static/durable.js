// durable.js: the selected session's durable state — its hibernation snapshot or
// last after-call checkpoint (size, names, what could not be saved) — and which of
// the Hibernate and Resume buttons apply. Everything comes from GET /v1/sessions.

import { ago, duration, formatBytes } from "./render.js";

/** describe says in one line what a snapshot or checkpoint holds. */
function describe(snap) {
  const names = snap.names || [];
  let text = formatBytes(snap.bytes || 0) + ", " + names.length + (names.length === 1 ? " name" : " names");
  if (snap.taken) {
    text += ", taken " + ago(snap.taken);
  }
  if (snap.took_ms !== undefined) {
    text += " in " + duration(snap.took_ms);
  }
  const skipped = Object.entries(snap.skipped || {});
  if (skipped.length) {
    text += "; not kept: " + skipped.map(([name, why]) => name + " (" + why + ")").join(", ");
  }
  return text;
}

/**
 * renderDurable fills box with info's durable state and shows the buttons that
 * apply: Hibernate for a live session at rest, Resume for a hibernated one.
 * info is undefined when the session is closed.
 */
export function renderDurable(box, hibernate, resume, info) {
  const st = info ? info.state : "";
  hibernate.hidden = st !== "idle";
  resume.hidden = st !== "hibernated";
  const lines = [];
  if (info && info.snapshot) {
    lines.push("Hibernated: snapshot " + describe(info.snapshot) + ". Its next call or Resume restores it.");
  } else if (st === "restoring") {
    lines.push("Restoring its snapshot into a new kernel…");
  }
  if (info && info.checkpoint) {
    lines.push("Checkpoint after call " + info.checkpoint.after_call + ": " + describe(info.checkpoint) + ".");
  }
  box.textContent = lines.join("\n");
  box.hidden = lines.length === 0;
}
