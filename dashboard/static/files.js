// files.js: a session's working directory, listed through the files API
// (GET /v1/sessions/{id}/files?path=DIR), one directory at a time, with a
// download button for each regular file (GET /v1/sessions/{id}/files/{path},
// served as an attachment). Session files are whatever the kernel's code wrote,
// under names it chose, so none is ever previewed or rendered here: a download
// is fetched with the token and saved as application/octet-stream (saveFile),
// and names are put into the page as text only. Symbolic links, FIFOs, sockets
// and devices are listed but offer nothing: the API refuses to open them.
//
// A listing is a job on the session's worker, queued behind its calls, and it
// counts as activity against idle culling; so the list is not polled. It is
// loaded when the session is selected, when the user opens a directory or asks
// for a refresh, and when the session has run another call, and only while the
// session is not busy, so a listing never waits behind a running cell.

import * as api from "./api.js";
import { saveFile } from "./download.js";
import { el, formatBytes } from "./render.js";

/** filePath is the files route of path (slash-separated) in session. */
export function filePath(session, path) {
  return "/v1/sessions/" + api.seg(session) + "/files/" + path.split("/").map(api.seg).join("/");
}

function join(dir, name) {
  return dir ? dir + "/" + name : name;
}

/** Files shows one session's working directory. */
export class Files {
  constructor(els) {
    this.els = els;
    this.session = "";
    this.dir = "";
    this.seen = ""; // the session activity the list was loaded for
    this.loading = false;
    this.again = false;
    els.up.addEventListener("click", () => this.open(this.dir.slice(0, Math.max(0, this.dir.lastIndexOf("/")))));
    els.refresh.addEventListener("click", () => this.load());
  }

  /** setSession switches to session id ("" for none), at its top directory. */
  setSession(id) {
    if (id === this.session) {
      return;
    }
    this.session = id;
    this.dir = "";
    this.seen = "";
    this.els.list.replaceChildren();
    this.els.msg.textContent = "";
    this.showDir();
  }

  /**
   * refresh is called on every poll with the session's info (undefined once it
   * is closed). It loads the list when the session ran something since the last
   * load and is not busy; it never waits for the load.
   */
  refresh(info) {
    if (!this.session) {
      return;
    }
    if (!info) {
      this.els.list.replaceChildren();
      this.els.msg.textContent = "The session is closed: its files are gone.";
      this.seen = "";
      return;
    }
    const key = [info.calls || 0, info.execution_count || 0, info.state].join(" ");
    if (key === this.seen || info.state === "busy" || info.state === "starting" || (info.queued || 0) > 0) {
      return;
    }
    this.seen = key;
    this.load();
  }

  open(dir) {
    this.dir = dir;
    this.showDir();
    this.load();
  }

  showDir() {
    this.els.path.textContent = "/" + this.dir;
    this.els.up.hidden = this.dir === "";
  }

  /** load lists the current directory; a load asked while one runs follows it. */
  async load() {
    if (this.loading) {
      this.again = true;
      return;
    }
    this.loading = true;
    try {
      do {
        this.again = false;
        await this.loadOnce();
      } while (this.again);
    } finally {
      this.loading = false;
    }
  }

  async loadOnce() {
    const session = this.session;
    const dir = this.dir;
    if (!session) {
      return;
    }
    let body;
    try {
      body = await api.getJSON("/v1/sessions/" + api.seg(session) + "/files?path=" + encodeURIComponent(dir));
    } catch (err) {
      if (session === this.session && dir === this.dir) {
        this.els.list.replaceChildren();
        this.els.msg.textContent = "Cannot list files: " + err.message;
      }
      return;
    }
    if (session !== this.session || dir !== this.dir) {
      return;
    }
    const entries = body.entries || [];
    this.els.list.replaceChildren(...entries.map((e) => this.item(session, dir, e)));
    this.els.msg.textContent = entries.length === 0 ? "No files." : body.truncated ? "More entries than shown." : "";
  }

  item(session, dir, e) {
    const li = el("li", "file");
    li.dataset.name = e.name;
    li.dataset.type = e.type;
    const path = join(dir, e.name);
    if (e.type === "dir") {
      const open = el("button", "link fname", e.name + "/");
      open.type = "button";
      open.addEventListener("click", () => this.open(path));
      li.appendChild(open);
    } else {
      li.appendChild(el("span", "fname", e.name));
    }
    li.appendChild(el("span", "fsize", e.type === "file" ? formatBytes(e.size || 0) : e.type));
    const when = el("span", "fmtime", e.mtime ? new Date(e.mtime).toLocaleString() : "");
    li.appendChild(when);
    if (e.type === "file") {
      const dl = el("button", "link download", "Download");
      dl.type = "button";
      dl.addEventListener("click", () => this.download(session, path, e.name, dl));
      li.appendChild(dl);
    }
    return li;
  }

  async download(session, path, name, button) {
    button.disabled = true;
    try {
      await saveFile(filePath(session, path), name);
      button.title = "";
    } catch (err) {
      button.title = "Download failed: " + err.message;
    } finally {
      button.disabled = false;
    }
  }
}
