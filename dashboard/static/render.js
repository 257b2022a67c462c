// render.js: turns nbformat v4 outputs into DOM nodes. Cell output is untrusted: it
// is only ever set as textContent, as an <img> source of a raster image (a data: or
// blob: URL), or as the srcdoc of an iframe sandboxed without allow-same-origin (so
// its HTML gets an opaque origin, no scripts, no forms, and cannot reach this page or
// its token). Nothing from a cell is parsed as HTML in the page itself.
//
// Active content (SVG, HTML, XML) is never given a URL of this origin: a blob: URL
// shows as an image inside an <img>, but "Open image in new tab" renders it as a
// document of this origin, where an SVG's <script> runs with the page's powers (issue
// 20 item 3). SVG is therefore drawn into a PNG (rasterSVG) and only the PNG is shown,
// and objectURL refuses every Blob type but raster images and opaque downloads.

const ansi = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

/** stripANSI removes terminal escape sequences (colours, cursor moves). */
export function stripANSI(s) {
  return String(s == null ? "" : s).replace(ansi, "");
}

/** el creates an element with a class and text content. */
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) {
    e.className = cls;
  }
  if (text !== undefined && text !== null) {
    e.textContent = String(text);
  }
  return e;
}

/** multiline joins an nbformat multiline string (a string or a list of strings). */
function multiline(v) {
  if (Array.isArray(v)) {
    return v.join("");
  }
  return v == null ? "" : String(v);
}

// maxStream is how much of one stream output the page shows (the end of it).
const maxStream = 512 * 1024;

const rasters = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/** renderOutput returns the DOM node for one nbformat output. */
export function renderOutput(out) {
  switch (out.output_type) {
    case "stream":
      return streamNode(out.name, out.text);
    case "error":
      return errorNode(out.ename, out.evalue, out.traceback);
    case "display_data":
    case "execute_result":
      return richNode(out.data || {});
    default:
      return el("pre", "out out-unknown", "(output of type " + out.output_type + ")");
  }
}

/** streamNode shows a stdout or stderr chunk; appendStream adds to it. */
export function streamNode(name, text) {
  const n = el("pre", "out out-stream out-" + (name === "stderr" ? "stderr" : "stdout"));
  n.dataset.stream = name;
  appendStream(n, text);
  return n;
}

/**
 * appendStream adds text to a stream node. A progress bar rewrites its line with
 * "\r": each line shows what follows its last carriage return. The raw text is kept
 * on the node so that a "\r" at the end of one chunk applies to the next.
 */
export function appendStream(node, text) {
  node.rawText = (node.rawText || "") + stripANSI(multiline(text)).replace(/\r\n/g, "\n");
  if (node.rawText.length > maxStream) {
    // Keep the page responsive with huge outputs; the API has the whole text.
    const tail = node.rawText.slice(-maxStream);
    node.rawText = tail.slice(tail.indexOf("\n") + 1);
    node.dataset.cut = "1";
  }
  let s = node.rawText;
  if (s.includes("\r")) {
    s = s.split("\n").map((line) => {
      const parts = line.split("\r").filter((p) => p !== "");
      return parts.length ? parts[parts.length - 1] : "";
    }).join("\n");
  }
  node.textContent = (node.dataset.cut ? "[… earlier output not shown here …]\n" : "") + s;
}

/** errorNode shows an exception with its traceback, without ANSI colours. */
export function errorNode(ename, evalue, traceback) {
  const box = el("div", "out out-error");
  box.appendChild(el("div", "ename", stripANSI(ename) + (evalue ? ": " + stripANSI(evalue) : "")));
  const tb = (traceback || []).map(stripANSI).join("\n");
  if (tb) {
    box.appendChild(el("pre", "traceback", tb));
  }
  return box;
}

/** richNode picks the richest MIME type of a display/result bundle it can show safely. */
function richNode(data) {
  for (const t of rasters) {
    if (data[t]) {
      return imageNode("data:" + t + ";base64," + multiline(data[t]).replace(/\s+/g, ""), t);
    }
  }
  if (data["image/svg+xml"]) {
    return svgNode(multiline(data["image/svg+xml"]));
  }
  if (data["text/html"]) {
    return htmlFrame(multiline(data["text/html"]));
  }
  if (data["text/markdown"] && !data["text/plain"]) {
    return el("pre", "out out-text", multiline(data["text/markdown"]));
  }
  if (data["text/plain"] !== undefined) {
    return el("pre", "out out-text", stripANSI(multiline(data["text/plain"])));
  }
  if (data["application/json"] !== undefined) {
    return el("pre", "out out-text", JSON.stringify(data["application/json"], null, 2));
  }
  return el("pre", "out out-unknown", "(" + Object.keys(data).join(", ") + ")");
}

function imageNode(src, type) {
  const img = el("img", "out out-image");
  img.alt = "cell output (" + type + ")";
  img.src = src;
  return img;
}

/** svgNode shows SVG markup as the PNG rasterSVG draws from it. */
function svgNode(text) {
  const img = el("img", "out out-image");
  img.alt = "cell output (image/svg+xml, drawn as PNG)";
  rasterSVG(text).then((r) => showRaster(img, r), (err) => {
    img.alt = "(SVG output not shown: " + err.message + ")";
  });
  return img;
}

/** showRaster puts a rasterSVG result into img at the SVG's own size. */
export function showRaster(img, r) {
  img.width = r.width;
  img.height = r.height;
  img.src = r.url;
}

// passiveTypes are the only Blob types objectURL gives a URL: images a browser
// decodes as pixels, and bytes it can only save.
const passiveTypes = new Set([...rasters, "application/octet-stream"]);

/**
 * objectURL returns a blob: URL for blob, refusing any type a browser could render
 * as a document (SVG, HTML, XML, text...): such a URL belongs to this origin, and a
 * person can always open it in a tab of its own.
 */
export function objectURL(blob) {
  if (!passiveTypes.has(blob.type)) {
    throw new Error("refusing a URL for content of type " + (blob.type || "(none)"));
  }
  return URL.createObjectURL(blob);
}

// maxRaster is the largest side, in device pixels, of a PNG drawn from an SVG.
const maxRaster = 4096;

/**
 * rasterSVG draws SVG markup into a PNG and resolves to { url, width, height }: a
 * data: URL of the PNG and the SVG's size in CSS pixels. The SVG is decoded as an
 * image from a data: URL (no URL of this origin ever names it), and in an image an
 * SVG runs no script and loads nothing. What the page shows, and what "Open image in
 * new tab" opens, is only the PNG.
 */
export function rasterSVG(text) {
  return new Promise((resolve, reject) => {
    const src = new Image();
    src.onerror = () => reject(new Error("not a valid SVG image"));
    src.onload = () => {
      try {
        // An SVG without a size of its own gets the default size of a replaced element.
        const width = src.naturalWidth || 300, height = src.naturalHeight || 150;
        const scale = Math.min(window.devicePixelRatio || 1, maxRaster / Math.max(width, height));
        const canvas = document.createElement("canvas");
        canvas.width = Math.max(1, Math.round(width * scale));
        canvas.height = Math.max(1, Math.round(height * scale));
        canvas.getContext("2d").drawImage(src, 0, 0, canvas.width, canvas.height);
        resolve({ url: canvas.toDataURL("image/png"), width, height });
      } catch (err) {
        reject(err);
      }
    };
    src.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
  });
}

/**
 * htmlFrame shows cell HTML in an iframe sandboxed without any allowance: an opaque
 * origin (no allow-same-origin), no scripts, forms, popups or top navigation. The
 * page's stylesheet for frames is linked so tables look like tables.
 */
export function htmlFrame(html) {
  const f = document.createElement("iframe");
  f.className = "out out-html";
  f.setAttribute("sandbox", "");
  f.setAttribute("referrerpolicy", "no-referrer");
  f.setAttribute("loading", "lazy");
  f.title = "HTML output (sandboxed)";
  f.srcdoc = '<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="' +
    new URL("frame.css", import.meta.url).href + '">' + html;
  return f;
}

/** renderOutputs replaces box's children with the nodes of outputs. */
export function renderOutputs(box, outputs) {
  revokeImages(box);
  box.replaceChildren(...(outputs || []).map(renderOutput));
}

/** revokeImages frees the blob: URLs of images under box. */
export function revokeImages(box) {
  for (const img of box.querySelectorAll("img")) {
    if (img.src.startsWith("blob:")) {
      URL.revokeObjectURL(img.src);
    }
  }
}

/** formatBytes writes a size for people. */
export function formatBytes(n) {
  if (n < 1024) {
    return n + " B";
  }
  const units = ["KiB", "MiB", "GiB"];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return v.toFixed(v < 10 ? 1 : 0) + " " + units[i];
}

/** ago writes how long ago an RFC 3339 time was. */
export function ago(iso) {
  const t = Date.parse(iso);
  if (!iso || isNaN(t) || t <= 0) {
    return "—";
  }
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) {
    return s + " s ago";
  }
  if (s < 3600) {
    return Math.floor(s / 60) + " min ago";
  }
  if (s < 86400) {
    return Math.floor(s / 3600) + " h ago";
  }
  return Math.floor(s / 86400) + " d ago";
}

/** duration writes milliseconds for people. */
export function duration(ms) {
  if (ms == null || isNaN(ms)) {
    return "";
  }
  if (ms < 1000) {
    return Math.round(ms) + " ms";
  }
  if (ms < 60000) {
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  }
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}
