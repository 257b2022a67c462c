// api.js: the dashboard's only way to the server. Every request carries the token
// (when there is one) as an Authorization header; it is never put in a URL.
// Server-Sent Events are read with fetch() and a stream reader, because EventSource
// cannot send headers.

const tokenKey = "kernelbox.token";

/** AuthError: the server answered 401 (no token, or the wrong one). */
export class AuthError extends Error {}

/** HTTPError: any other non-2xx answer; status and the API's error code are kept. */
export class HTTPError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function getToken() {
  return sessionStorage.getItem(tokenKey) || "";
}

export function setToken(token) {
  if (token) {
    sessionStorage.setItem(tokenKey, token);
  } else {
    sessionStorage.removeItem(tokenKey);
  }
}

function headers(extra) {
  const h = new Headers(extra || {});
  const token = getToken();
  if (token) {
    h.set("Authorization", "Bearer " + token);
  }
  return h;
}

async function check(resp) {
  if (resp.ok) {
    return resp;
  }
  if (resp.status === 401) {
    throw new AuthError("the server refused the token (401)");
  }
  let code = "", message = resp.status + " " + resp.statusText;
  try {
    const body = await resp.json();
    code = body.code || (body.error && body.error.code) || "";
    message = body.message || (body.error && (body.error.message || body.error)) || message;
  } catch (_) {
    // Not JSON: keep the status line.
  }
  throw new HTTPError(resp.status, code, String(message));
}

/** request sends one API request and returns the Response (2xx only). */
export async function request(method, path, body, signal) {
  const init = { method, headers: headers(), signal, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(body);
  }
  return check(await fetch(path, init));
}

/** getJSON fetches path and decodes its JSON body. */
export async function getJSON(path, signal) {
  return (await request("GET", path, undefined, signal)).json();
}

/** postJSON posts body (or nothing) to path and decodes the JSON answer, if any. */
export async function post(path, body) {
  const resp = await request("POST", path, body);
  const text = await resp.text();
  return text ? JSON.parse(text) : {};
}

/** getBlob fetches path (an artifact) with the token and returns it as a Blob. */
export async function getBlob(path, type) {
  const resp = await request("GET", path);
  const blob = await resp.blob();
  return type ? new Blob([blob], { type }) : blob;
}

/** seg escapes one path segment. */
export const seg = encodeURIComponent;

/** artifactPath is the download path of an artifact name (slash-separated). */
export function artifactPath(session, name) {
  return "/v1/artifacts/" + seg(session) + "/" + name.split("/").map(seg).join("/");
}

/**
 * follow reads a call's events (GET /v1/calls/{id}/events) and hands each to
 * onEvent(name, data, id) until a "done" or "failed" event, reconnecting with
 * Last-Event-ID after a dropped connection so nothing repeats or goes missing.
 * It resolves when the call has ended or signal aborts.
 */
export async function follow(callID, onEvent, signal) {
  let lastID = "";
  let failures = 0;
  for (;;) {
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (lastID) {
        h.set("Last-Event-ID", lastID);
      }
      const resp = await check(await fetch("/v1/calls/" + seg(callID) + "/events",
        { headers: h, signal, cache: "no-store", credentials: "omit" }));
      let ended = false;
      await readEvents(resp.body, (ev) => {
        if (ev.id) {
          lastID = ev.id;
        }
        failures = 0;
        ended = ended || ev.event === "done" || ev.event === "failed";
        onEvent(ev.event, ev.data, ev.id);
      });
      if (ended) {
        return;
      }
    } catch (err) {
      if (signal && signal.aborted) {
        return;
      }
      if (err instanceof AuthError || (err instanceof HTTPError && err.status < 500)) {
        throw err;
      }
      failures++;
      if (failures > 20) {
        throw err;
      }
    }
    if (signal && signal.aborted) {
      return;
    }
    await new Promise((r) => setTimeout(r, Math.min(250 * (failures + 1), 3000)));
  }
}

/**
 * readEvents parses a text/event-stream body and calls onEvent({event, data, id})
 * for each event, with data decoded from JSON when it is JSON.
 */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let ev = { event: "message", data: [], id: "" };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      return;
    }
    buf += value;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (ev.data.length > 0) {
          onEvent({ event: ev.event, id: ev.id, data: decode(ev.data.join("\n")) });
        }
        ev = { event: "message", data: [], id: ev.id };
        continue;
      }
      if (line.startsWith(":")) {
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) {
        val = val.slice(1);
      }
      if (field === "event") {
        ev.event = val;
      } else if (field === "data") {
        ev.data.push(val);
      } else if (field === "id") {
        ev.id = val;
      }
    }
  }
}

function decode(text) {
  try {
    return JSON.parse(text);
  } catch (_) {
    return text;
  }
}
