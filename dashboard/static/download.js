// download.js: saving a file the API serves (an artifact, a session file). It is
// fetched with the token (no token in a link) and handed to the browser as a
// blob: URL typed application/octet-stream, so it is saved, never rendered at
// this origin, whatever it holds.

import * as api from "./api.js";
import { objectURL } from "./render.js";

/** saveFile fetches path and saves it as filename. */
export async function saveFile(path, filename) {
  const blob = await api.getBlob(path, "application/octet-stream");
  const url = objectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
