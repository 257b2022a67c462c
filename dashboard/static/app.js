// app.js: the dashboard's entry point. It logs in (when the server has a token),
// polls the session list, and shows the selected session's artifacts and calls.
// Everything it shows comes from the HTTP API; see api.js for how the token is sent.

import * as api from "./api.js";
import { ago, el } from "./render.js";
import { Calls } from "./calls.js";
import { Artifacts } from "./artifacts.js";
import { Files } from "./files.js";
import { renderDurable } from "./durable.js";

const pollMS = 2000;
const $ = (id) => document.getElementById(id);

const state = {
  selected: "",
  timer: 0,
  polling: false,
  tokenless: false,
  calls: null,
  artifacts: null,
  files: null,
  confirm: { button: null, timer: 0 },
};

function setConn(text, kind) {
  const c = $("conn");
  c.textContent = text;
  c.dataset.kind = kind;
}

function showLogin(message) {
  stopPolling();
  state.calls.setSession("");
  state.artifacts.setSession("");
  state.files.setSession("");
  $("main").hidden = true;
  $("logout").hidden = true;
  $("who").hidden = true;
  $("login").hidden = false;
  const e = $("login-error");
  e.textContent = message || "";
  e.hidden = !message;
  setConn(message ? "token refused" : "login required", "warn");
  $("token").focus();
}

function showMain() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = state.tokenless;
}

function stopPolling() {
  state.polling = false;
  clearTimeout(state.timer);
}

function startPolling() {
  stopPolling();
  state.polling = true;
  poll();
}

async function poll() {
  if (!state.polling) {
    return;
  }
  await refresh();
  if (state.polling) {
    state.timer = setTimeout(poll, pollMS);
  }
}

/** refresh reloads the session list and the selected session's details. */
async function refresh() {
  let body;
  try {
    body = await api.getJSON("/v1/sessions");
  } catch (err) {
    if (err instanceof api.AuthError) {
      showLogin(api.getToken() ? "The server refused the stored token (401). Log in again." : "");
    } else {
      setConn("cannot reach the server: " + err.message, "bad");
    }
    return;
  }
  setConn("live · updated " + new Date().toLocaleTimeString(), "ok");
  const sessions = body.sessions || [];
  renderSessions(sessions);
  if (state.selected) {
    const info = sessions.find((s) => s.id === state.selected);
    $("detail-msg").textContent = info ? "" : "Session " + state.selected + " is closed (its artifacts stay).";
    $("actions").hidden = !info;
    renderDurable($("durable"), $("btn-hibernate"), $("btn-resume"), info);
    state.files.refresh(info);
    try {
      await Promise.all([state.calls.refresh(), state.artifacts.refresh()]);
    } catch (err) {
      if (err instanceof api.AuthError) {
        showLogin("The server refused the token (401). Log in again.");
      }
    }
  }
}

function renderSessions(sessions) {
  const body = $("sessions-body");
  $("sessions-empty").hidden = sessions.length > 0;
  const rows = sessions
    .slice()
    .sort((a, b) => String(a.id).localeCompare(String(b.id)))
    .map(sessionRow);
  body.replaceChildren(...rows);
}

function sessionRow(s) {
  const tr = el("tr", s.id === state.selected ? "selected" : "");
  tr.dataset.session = s.id;
  tr.tabIndex = 0;
  const sid = el("td", "sid", s.id);
  if (s.template) {
    // The template the session was created with (small, beside its id).
    const tm = el("span", "tmpl", s.template);
    tm.title = "template";
    sid.appendChild(tm);
  }
  tr.appendChild(sid);
  const st = el("td", "state");
  st.appendChild(el("span", "badge state-" + s.state, s.state));
  tr.appendChild(st);
  tr.appendChild(el("td", "num queued", s.queued || 0));
  tr.appendChild(el("td", "num", s.execution_count || 0));
  tr.appendChild(el("td", "num", s.calls || 0));
  const last = el("td", "ago", ago(s.last_activity));
  last.title = s.last_activity || "";
  tr.appendChild(last);
  tr.addEventListener("click", () => select(s.id));
  tr.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      select(s.id);
    }
  });
  return tr;
}

/** select shows one session's details. */
async function select(id) {
  state.selected = id;
  for (const tr of $("sessions-body").children) {
    tr.classList.toggle("selected", tr.dataset.session === id);
  }
  $("detail-title").textContent = "Session " + id;
  $("detail-body").hidden = false;
  $("actions").hidden = false;
  $("detail-msg").textContent = "";
  $("run-session").value = id;
  disarm();
  state.calls.setSession(id);
  state.artifacts.setSession(id);
  state.files.setSession(id);
  await refresh();
}

/** act runs one of the session buttons and says what happened. */
async function act(label, fn) {
  const id = state.selected;
  if (!id) {
    return;
  }
  const msg = $("detail-msg");
  msg.textContent = label + "…";
  try {
    await fn(id);
    msg.textContent = label + ": done.";
  } catch (err) {
    if (err instanceof api.AuthError) {
      showLogin("The server refused the token (401). Log in again.");
      return;
    }
    msg.textContent = label + " failed: " + err.message;
  }
  await refresh();
}

/** armed makes a destructive button ask for a second click within 4 seconds. */
function armed(button, label) {
  if (state.confirm.button === button) {
    disarm();
    return true;
  }
  disarm();
  state.confirm.button = button;
  button.dataset.label = button.textContent;
  button.textContent = label;
  button.classList.add("armed");
  state.confirm.timer = setTimeout(disarm, 4000);
  return false;
}

function disarm() {
  const b = state.confirm.button;
  if (b) {
    b.textContent = b.dataset.label;
    b.classList.remove("armed");
  }
  clearTimeout(state.confirm.timer);
  state.confirm.button = null;
}

async function login(event) {
  event.preventDefault();
  const input = $("token");
  const token = input.value.trim();
  input.value = "";
  if (token) {
    await useToken(token);
  }
}

/** useToken logs in with token (pasted, or handed over in the URL fragment). */
async function useToken(token) {
  api.setToken(token);
  try {
    await api.getJSON("/v1/sessions");
  } catch (err) {
    api.setToken("");
    showLogin(err instanceof api.AuthError
      ? "Wrong token: the server refused it (401 Unauthorized)."
      : "Cannot reach the server: " + err.message);
    return;
  }
  state.tokenless = false;
  showMain();
  showWho();
  startPolling();
}

/**
 * showWho names a scoped token in the header: the server shows such a token
 * only its own sessions (docs/security.md), so the page says whose view it is.
 */
async function showWho() {
  const who = $("who");
  who.hidden = true;
  try {
    const me = await api.getJSON("/v1/token");
    if (!me.admin) {
      who.textContent = "scoped token: " + me.name + " (its sessions only)";
      who.hidden = false;
    }
  } catch (_) {
    // A server without scoped tokens: the admin's view.
  }
}

/**
 * fragmentToken takes a token handed over as #token=... (the URL `kernelbox
 * dashboard` prints) and removes the fragment from the address bar and the tab's
 * history at once, so that it does not linger where it can be read over a
 * shoulder or copied along with the URL. A fragment is never sent to the server
 * nor in a Referer. Returns "" when the URL carries none.
 */
function fragmentToken() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (!params.has("token")) {
    return "";
  }
  history.replaceState(null, "", location.pathname + location.search);
  return (params.get("token") || "").trim();
}

async function run(event) {
  event.preventDefault();
  const id = $("run-session").value.trim();
  const code = $("run-code").value;
  const errBox = $("run-error");
  errBox.hidden = true;
  try {
    await api.post("/v1/sessions/" + api.seg(id) + "/execute", { code, detach: true });
  } catch (err) {
    errBox.textContent = err instanceof api.AuthError ? "The server refused the token (401)." : err.message;
    errBox.hidden = false;
    return;
  }
  $("run-code").value = "";
  await select(id);
}

function wire() {
  state.calls = new Calls($("calls"), $("calls-msg"));
  state.artifacts = new Artifacts({
    list: $("artifacts"), empty: $("artifacts-empty"), preview: $("preview"),
    previewImg: $("preview-img"), previewName: $("preview-name"), previewClose: $("preview-close"),
  });
  state.files = new Files({
    list: $("files"), msg: $("files-msg"), path: $("files-path"), up: $("files-up"), refresh: $("files-refresh"),
  });
  $("login-form").addEventListener("submit", login);
  $("run-form").addEventListener("submit", run);
  $("logout").addEventListener("click", () => {
    api.setToken("");
    showLogin("");
  });
  $("btn-interrupt").addEventListener("click", () =>
    act("Interrupt", (id) => api.post("/v1/sessions/" + api.seg(id) + "/interrupt")));
  $("btn-hibernate").addEventListener("click", () =>
    act("Hibernate", (id) => api.post("/v1/sessions/" + api.seg(id) + "/hibernate")));
  $("btn-resume").addEventListener("click", () =>
    act("Resume", (id) => api.post("/v1/sessions/" + api.seg(id) + "/resume")));
  $("btn-reset").addEventListener("click", (e) => {
    if (armed(e.currentTarget, "Reset: sure?")) {
      act("Reset", (id) => api.post("/v1/sessions/" + api.seg(id) + "/reset"));
    }
  });
  $("btn-close").addEventListener("click", (e) => {
    if (armed(e.currentTarget, "Close: sure?")) {
      act("Close", (id) => api.request("DELETE", "/v1/sessions/" + api.seg(id)));
    }
  });
}

/** boot decides between the login form and the dashboard. */
async function boot() {
  wire();
  // A #token=... URL opened in a tab that is already showing the page changes
  // only the fragment: no reload, so listen for it.
  window.addEventListener("hashchange", () => {
    const token = fragmentToken();
    if (token) {
      useToken(token);
    }
  });
  const handed = fragmentToken();
  if (handed) {
    await useToken(handed);
    return;
  }
  if (!api.getToken()) {
    try {
      await api.getJSON("/v1/sessions");
      state.tokenless = true;
    } catch (err) {
      if (err instanceof api.AuthError) {
        showLogin("");
        return;
      }
    }
  }
  showMain();
  startPolling();
}

boot();
