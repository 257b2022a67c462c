package httpapi

import (
	"github.com/kernelbox/kernelbox/api"

	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/executor"
)

// The session files routes (their rows are in routes.go):
//
//	PUT    /v1/sessions/{id}/files/{path}   write a file (raw body; If-None-Match: * refuses to overwrite)
//	GET    /v1/sessions/{id}/files/{path}   read a file (an attachment)
//	DELETE /v1/sessions/{id}/files/{path}   delete a file (?recursive=1 for a directory)
//	GET    /v1/sessions/{id}/files?path=DIR list a directory (&max=N entries)
//	POST   /v1/sessions/{id}/files:batch    several uploads and downloads, a result each
//
// Their handlers see the path as sent (Route.AsSent): the mux would clean
// "a/../b" and redirect it, while the files API must see it to refuse it
// (invalid_path). A PUT or a batch with uploads creates the session if it does
// not exist yet, as execute does; the other routes answer 404 for a session the
// executor does not know.

// DefaultMaxBatchBytes is the default of Options.MaxBatchBytes.
const DefaultMaxBatchBytes = 64 << 20

func (h *handler) putFile(w http.ResponseWriter, r *http.Request, id, file string) {
	o := api.PutOptions{NoOverwrite: strings.TrimSpace(r.Header.Get("If-None-Match")) == "*"}
	n, err := h.e.PutFile(r.Context(), id, file, r.Body, o)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.FileWritten{SessionID: id, Path: file, Size: n})
}

func (h *handler) getFile(w http.ResponseWriter, r *http.Request, id, file string) {
	// Opened on the session's worker, sent after (see Executor.GetFile).
	f, size, err := h.e.GetFile(r.Context(), id, file)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer f.Close()
	setDownloadHeaders(w, file, size)
	_, _ = io.Copy(w, io.LimitReader(f, size))
}

// setDownloadHeaders sets what a download of a session file (or an artifact)
// is sent with: files are written by untrusted code, so a browser must neither
// render one as part of this origin nor let one that it renders load or run
// anything.
func setDownloadHeaders(w http.ResponseWriter, name string, size int64) {
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(name)}))
}

func (h *handler) removeFile(w http.ResponseWriter, r *http.Request, id, file string) {
	recursive, _ := strconv.ParseBool(r.URL.Query().Get("recursive"))
	err := h.e.RemoveFile(r.Context(), id, file, recursive)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) listFiles(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	max := 0
	if s := q.Get("max"); s != "" {
		var err error
		if max, err = strconv.Atoi(s); err != nil || max <= 0 {
			writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "max must be a positive number of entries")
			return
		}
		// A kernel can make a directory of millions of empty files: the
		// answer, held whole in memory, stays within the default.
		max = min(max, api.DefaultMaxListEntries)
	}
	l, err := h.e.ListFiles(r.Context(), id, q.Get("path"), max)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FileListing{SessionID: id, DirListing: l})
}

// batchFiles writes the batch's uploads, then reads its downloads, in one job
// on the session's worker. Each file gets its own result; only a problem with
// the request or the session fails the whole answer. The downloads together
// are limited to MaxBatchBytes: past it a file's result is too_large.
func (h *handler) batchFiles(w http.ResponseWriter, r *http.Request, id string) {
	var b api.FileBatch
	if err := decode(r, &b); err != nil {
		writeErr(w, err)
		return
	}
	if len(b.Uploads)+len(b.Downloads) == 0 {
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "the batch has no uploads and no downloads")
		return
	}
	if len(b.Uploads)+len(b.Downloads) > maxBatchFiles {
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("the batch has more than %d files", maxBatchFiles))
		return
	}
	res := api.FileBatchResult{SessionID: id, Uploads: make([]api.FileResult, len(b.Uploads)), Downloads: make([]api.FileResult, len(b.Downloads))}
	op := executor.FileOp{Read: len(b.Downloads) > 0, Write: len(b.Uploads) > 0, Create: len(b.Uploads) > 0}
	err := h.e.Files(r.Context(), id, op, func(ctx context.Context, fs executor.SessionFiles) error {
		for i, u := range b.Uploads {
			n, err := fs.Put(ctx, u.Path, bytes.NewReader(u.Content), api.PutOptions{NoOverwrite: u.NoOverwrite})
			res.Uploads[i] = fileResult(u.Path, n, err)
		}
		budget := h.o.MaxBatchBytes
		for i, d := range b.Downloads {
			res.Downloads[i] = readForBatch(ctx, fs, d.Path, &budget)
		}
		return nil
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxBatchFiles bounds the files of one batch.
const maxBatchFiles = 1000

// readForBatch reads one download of a batch, within what is left of budget.
func readForBatch(ctx context.Context, fs executor.SessionFiles, p string, budget *int64) api.FileResult {
	f, size, err := fs.Get(ctx, p)
	if err != nil {
		return fileResult(p, 0, err)
	}
	defer f.Close()
	if size > *budget {
		return api.FileResult{Path: p, Status: api.CodeTooLarge, Error: fmt.Sprintf("%d bytes: over what is left of the batch's %d-byte limit; download it alone", size, *budget)}
	}
	b, err := io.ReadAll(io.LimitReader(f, *budget+1))
	if err == nil && int64(len(b)) > *budget {
		return api.FileResult{Path: p, Status: api.CodeTooLarge, Error: "grew while it was read: over the batch's limit"}
	}
	if err != nil {
		return fileResult(p, 0, err)
	}
	*budget -= int64(len(b))
	r := fileResult(p, int64(len(b)), nil)
	r.Content = b
	return r
}

// fileResult is the batch result for one file.
func fileResult(p string, n int64, err error) api.FileResult {
	if err == nil {
		return api.FileResult{Path: p, Status: api.FileOK, Size: n}
	}
	_, code := classify(err)
	return api.FileResult{Path: p, Status: code, Error: err.Error()}
}
