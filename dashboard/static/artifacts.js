// artifacts.js: a session's artifacts (GET /v1/sessions/{id}/artifacts) with
// download buttons and an image preview. Files are fetched with the token and handed
// to the browser as blob: URLs, so no token ever appears in a link. Only raster
// images and downloads typed application/octet-stream get such a URL (objectURL): an
// SVG artifact is previewed as a PNG drawn from it, since an SVG under a URL of this
// origin runs its script there when opened in a tab of its own.

import * as api from "./api.js";
import { saveFile } from "./download.js";
import { el, formatBytes, objectURL, rasterSVG, showRaster } from "./render.js";

const viewable = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"]);

function baseName(name) {
  return name.slice(name.lastIndexOf("/") + 1);
}

/** Artifacts keeps one session's artifact list in step with the server. */
export class Artifacts {
  constructor(els) {
    this.els = els;
    this.session = "";
    this.shown = "";
    this.previewURL = "";
    els.previewClose.addEventListener("click", () => this.closePreview());
  }

  /** setSession switches to session id ("" for none). */
  setSession(id) {
    if (id === this.session) {
      return;
    }
    this.session = id;
    this.shown = "";
    this.els.list.replaceChildren();
    this.closePreview();
  }

  /** refresh reloads the list; the DOM changes only when the list did. */
  async refresh() {
    const session = this.session;
    if (!session) {
      return;
    }
    let body;
    try {
      body = await api.getJSON("/v1/sessions/" + api.seg(session) + "/artifacts");
    } catch (err) {
      if (err instanceof api.AuthError) {
        throw err;
      }
      this.els.empty.textContent = "Cannot list artifacts: " + err.message;
      this.els.empty.hidden = false;
      return;
    }
    if (session !== this.session) {
      return;
    }
    const arts = (body.artifacts || []).slice().sort((a, b) => a.name.localeCompare(b.name));
    const key = JSON.stringify(arts.map((a) => [a.name, a.size, a.mime]));
    if (key === this.shown) {
      return;
    }
    this.shown = key;
    this.els.empty.textContent = "No artifacts.";
    this.els.empty.hidden = arts.length > 0;
    this.els.list.replaceChildren(...arts.map((a) => this.item(session, a)));
  }

  item(session, a) {
    const li = el("li", "artifact");
    li.dataset.name = a.name;
    li.appendChild(el("span", "aname", a.name));
    li.appendChild(el("span", "asize", formatBytes(a.size || 0)));
    li.appendChild(el("span", "amime", a.mime || ""));
    if (viewable.has(a.mime)) {
      const view = el("button", "link view", "View");
      view.type = "button";
      view.addEventListener("click", () => this.view(session, a));
      li.appendChild(view);
    }
    const dl = el("button", "link download", "Download");
    dl.type = "button";
    dl.addEventListener("click", () => this.download(session, a, dl));
    li.appendChild(dl);
    return li;
  }

  async view(session, a) {
    try {
      const blob = await api.getBlob(api.artifactPath(session, a.name), a.mime);
      const svg = a.mime === "image/svg+xml" ? await rasterSVG(await blob.text()) : null;
      this.closePreview();
      this.els.previewName.textContent = a.name;
      this.els.previewImg.alt = a.name;
      if (svg) {
        showRaster(this.els.previewImg, svg);
      } else {
        this.previewURL = objectURL(blob);
        this.els.previewImg.src = this.previewURL;
      }
      this.els.preview.hidden = false;
    } catch (err) {
      this.els.previewName.textContent = "Cannot open " + a.name + ": " + err.message;
      this.els.preview.hidden = false;
    }
  }

  async download(session, a, button) {
    button.disabled = true;
    try {
      await saveFile(api.artifactPath(session, a.name), baseName(a.name));
    } catch (err) {
      button.title = "Download failed: " + err.message;
    } finally {
      button.disabled = false;
    }
  }

  closePreview() {
    if (this.previewURL) {
      URL.revokeObjectURL(this.previewURL);
      this.previewURL = "";
    }
    this.els.previewImg.removeAttribute("src");
    this.els.previewImg.removeAttribute("width");
    this.els.previewImg.removeAttribute("height");
    this.els.preview.hidden = true;
  }
}
