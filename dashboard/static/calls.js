// calls.js: a session's recent calls (GET /v1/sessions/{id}/calls), each with its
// code, status, duration and outputs. A call that is queued or running is followed
// live through its event stream; a finished one shows its Result's outputs.

import * as api from "./api.js";
import {
  appendStream, duration, el, errorNode, renderOutput, renderOutputs, revokeImages, streamNode,
} from "./render.js";

const maxCalls = 20;

/** label is what a call's badge says. */
function label(info, result) {
  if (info.state !== "done") {
    return info.state || "queued";
  }
  const status = (result && result.status) || info.status || "done";
  const ename = result && result.error && result.error.ename;
  if (status === "error" && ename === "KeyboardInterrupt") {
    return "interrupted";
  }
  return status;
}

/** truncationText says which live events a reader missed (an api.Truncation). */
function truncationText(t) {
  if (!t) {
    return "Some live output was skipped.";
  }
  return "Live output skipped: events " + t.from + "–" + t.to + " (" + t.events + " events, " +
    t.bytes + " bytes) were dropped from the call's log before this page read them.";
}

/** Calls keeps the calls list of one session in step with the server. */
export class Calls {
  constructor(list, msg) {
    this.list = list;
    this.msg = msg;
    this.session = "";
    this.views = new Map();
    this.abort = new AbortController();
  }

  /** setSession switches to session id ("" for none), stopping every live stream. */
  setSession(id) {
    if (id === this.session) {
      return;
    }
    this.abort.abort();
    this.abort = new AbortController();
    for (const v of this.views.values()) {
      revokeImages(v.node);
    }
    this.views.clear();
    this.list.replaceChildren();
    this.msg.textContent = "";
    this.session = id;
  }

  /** refresh fetches the list and updates, adds or drops call views. */
  async refresh() {
    const session = this.session;
    if (!session) {
      return;
    }
    let body;
    try {
      body = await api.getJSON("/v1/sessions/" + api.seg(session) + "/calls", this.abort.signal);
    } catch (err) {
      if (session !== this.session || this.abort.signal.aborted) {
        return;
      }
      if (err instanceof api.AuthError) {
        throw err;
      }
      this.msg.textContent = err.status === 404 && !err.code
        ? "This server does not list calls (GET /v1/sessions/{id}/calls answered 404)."
        : "Cannot list calls: " + err.message;
      return;
    }
    if (session !== this.session) {
      return;
    }
    const calls = (body.calls || []).slice(0, maxCalls);
    this.msg.textContent = calls.length ? "" : "No calls yet.";
    this.sync(calls);
  }

  sync(calls) {
    const keep = new Set(calls.map((c) => c.call_id));
    for (const [id, v] of this.views) {
      if (!keep.has(id)) {
        revokeImages(v.node);
        v.node.remove();
        this.views.delete(id);
      }
    }
    let prev = null;
    for (const info of calls) {
      let v = this.views.get(info.call_id);
      if (!v) {
        v = this.create(info);
        this.views.set(info.call_id, v);
      }
      if (!v.live) {
        this.update(v, info);
      }
      const want = prev ? prev.nextSibling : this.list.firstChild;
      if (want !== v.node) {
        this.list.insertBefore(v.node, want);
      }
      prev = v.node;
      this.load(v);
    }
  }

  create(info) {
    const node = el("li", "call");
    node.dataset.call = info.call_id;
    const head = el("div", "call-head");
    const badge = el("span", "badge");
    const when = el("span", "when");
    const dur = el("span", "dur");
    const id = el("span", "callid", info.call_id);
    head.append(badge, when, dur, id);
    const code = el("pre", "code", info.code || "");
    const outputs = el("div", "outputs");
    const note = el("p", "note");
    note.hidden = true;
    node.append(head, code, outputs, note);
    return { info, node, badge, when, dur, outputs, note, live: false, loaded: false, result: null, clearNext: false };
  }

  /** update shows a call's state from a CallInfo (or the Result it ended with). */
  update(v, info, result) {
    v.info = Object.assign({}, v.info, info);
    if (result) {
      v.result = result;
    }
    const text = label(v.info, v.result);
    v.badge.textContent = text;
    v.badge.className = "badge status-" + text;
    v.node.dataset.state = v.info.state || "";
    v.node.dataset.status = text;
    const started = v.info.started || v.info.created;
    v.when.textContent = started ? new Date(started).toLocaleTimeString() : "";
    const ms = v.result && v.result.duration_ms != null ? v.result.duration_ms : v.info.duration_ms;
    v.dur.textContent = v.info.state === "done" ? duration(ms) : "";
  }

  /** load follows a live call, or fetches a finished call's Result once. */
  load(v) {
    if (v.loaded || v.live) {
      return;
    }
    if (v.info.state === "done") {
      v.loaded = true;
      api.getJSON("/v1/calls/" + api.seg(v.info.call_id), this.abort.signal)
        .then((full) => this.finish(v, full, full.result))
        .catch((err) => this.fail(v, err));
      return;
    }
    v.live = true;
    api.follow(v.info.call_id, (name, data) => this.event(v, name, data), this.abort.signal)
      .catch((err) => this.fail(v, err))
      .finally(() => {
        v.live = false;
      });
  }

  finish(v, info, result) {
    v.loaded = true;
    const done = Object.assign({}, info, { state: "done" });
    if (result) {
      done.status = done.status || result.status;
      renderOutputs(v.outputs, result.outputs);
      this.notes(v, result);
    }
    this.update(v, done, result);
  }

  notes(v, result) {
    const parts = [];
    if (result.truncated) {
      parts.push(result.truncation_note || "Some output was dropped.");
    }
    if (result.state_lost) {
      parts.push("The session's state was lost (the kernel restarted).");
    }
    for (const n of result.notes || []) {
      parts.push(n);
    }
    if (result.status !== "ok" && result.error && !(result.outputs || []).some((o) => o.output_type === "error")) {
      v.outputs.appendChild(errorNode(result.error.ename, result.error.evalue, result.error.traceback));
    }
    v.note.textContent = parts.join(" ");
    v.note.hidden = parts.length === 0;
  }

  fail(v, err) {
    if (this.abort.signal.aborted) {
      return;
    }
    // Try again at the next refresh, but not forever.
    v.failures = (v.failures || 0) + 1;
    v.loaded = v.failures >= 3;
    v.note.textContent = "Cannot follow this call: " + err.message;
    v.note.hidden = false;
  }

  /** event applies one live event of a call's stream. */
  event(v, name, data) {
    const d = data && typeof data === "object" ? data : {};
    switch (name) {
      case "call":
        this.update(v, d);
        break;
      case "status":
        if (d.state) {
          this.update(v, { state: d.state === "starting" ? "running" : d.state });
        }
        break;
      case "stream":
        this.streamEvent(v, d.name, d.text);
        break;
      case "display":
      case "result":
      case "error":
        if (d.output) {
          this.clearPending(v);
          v.outputs.appendChild(renderOutput(d.output));
        }
        break;
      case "clear_output":
        if (d.wait) {
          v.clearNext = true;
        } else {
          renderOutputs(v.outputs, []);
        }
        break;
      case "truncated":
        v.note.textContent = truncationText(d.truncation) + " The final result is complete.";
        v.note.hidden = false;
        break;
      case "done":
        this.finish(v, { call_id: v.info.call_id }, d);
        break;
      case "failed":
        this.update(v, { state: "done", status: "failed" });
        v.note.textContent = "The call failed: " + ((d.error && d.error.message) || JSON.stringify(data));
        v.note.hidden = false;
        v.loaded = true;
        break;
    }
  }

  clearPending(v) {
    if (v.clearNext) {
      v.clearNext = false;
      renderOutputs(v.outputs, []);
    }
  }

  streamEvent(v, name, text) {
    this.clearPending(v);
    const last = v.outputs.lastElementChild;
    if (last && last.dataset.stream === name) {
      appendStream(last, text);
    } else {
      v.outputs.appendChild(streamNode(name, text));
    }
  }
}
