package api

import "time"

// The session files API is implemented twice, on the host's session directory
// (workspace.Session) and in a kernel (kernelfs.Files), and offered through the
// executor (executor.SessionFiles) to HTTP and MCP. Both implementations take and
// return the types below, check paths by one rule (paths.CheckPath's strictest)
// and fail with this package's sentinels (ErrInvalidPath, ErrNotFound, …).

// DefaultMaxListEntries is how many entries a listing holds when its caller
// asks for no number.
const DefaultMaxListEntries = 10_000

// PutOptions configures a file upload of the files API. The zero value
// overwrites and uses the server's per-file limit.
type PutOptions struct {
	// NoOverwrite refuses (ErrExists) when something is at the path already.
	NoOverwrite bool

	// MaxBytes limits the file. Defaults to the server's per-file limit
	// (workspace.Options.MaxFileBytes).
	MaxBytes int64
}

// FileEntry is one entry of a session directory listing
// (GET /v1/sessions/{id}/files?path=DIR).
type FileEntry struct {
	// Name is the entry's name in its directory.
	Name string `json:"name"`
	// Type is "file", "dir", "symlink" or "other" (a FIFO, socket or device).
	Type string `json:"type"`
	// Size is the size in bytes (a symbolic link's is its target's length).
	Size int64 `json:"size"`
	// ModTime is the last modification time.
	ModTime time.Time `json:"mtime"`
}

// DirListing is one directory of a session as the files API lists it: at most
// the entries asked for, sorted by name, without kernelbox's temporary files
// and names that are not valid UTF-8 (which no client could ask for again).
type DirListing struct {
	// Path is the directory listed, relative to the session directory ("" for it).
	Path string `json:"path"`
	// Entries are sorted by name.
	Entries []FileEntry `json:"entries"`
	// Truncated says the directory holds more entries than were listed.
	Truncated bool `json:"truncated"`
}

// FileListing is the answer of GET /v1/sessions/{id}/files?path=DIR: the
// session's id and its directory's listing.
type FileListing struct {
	SessionID string `json:"session_id"`
	DirListing
}

// FileWritten is the answer of PUT /v1/sessions/{id}/files/{path}.
type FileWritten struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Size      int64  `json:"size"`
}

// FileBatch is the body of POST /v1/sessions/{id}/files:batch: uploads are
// written first, in order, then downloads are read.
type FileBatch struct {
	Uploads   []FileUpload   `json:"uploads,omitempty"`
	Downloads []FileDownload `json:"downloads,omitempty"`
}

// FileUpload is one file of a batch to write.
type FileUpload struct {
	Path string `json:"path"`
	// Content is the file's bytes (base64 in JSON).
	Content []byte `json:"content"`
	// NoOverwrite refuses (status "exists") when something is at Path already.
	NoOverwrite bool `json:"no_overwrite,omitempty"`
}

// FileDownload is one file of a batch to read.
type FileDownload struct {
	Path string `json:"path"`
}

// FileBatchResult is the answer of POST /v1/sessions/{id}/files:batch: one
// result per upload and per download, in the order asked. One bad file never
// fails the batch: its result says why.
type FileBatchResult struct {
	SessionID string       `json:"session_id"`
	Uploads   []FileResult `json:"uploads"`
	Downloads []FileResult `json:"downloads"`
}

// FileResult is the outcome for one file of a batch.
type FileResult struct {
	Path string `json:"path"`
	// Status is "ok" or the error code: not_found, is_directory, not_directory,
	// too_large, quota, invalid_path, exists (or internal).
	Status Code `json:"status"`
	// Error says what went wrong, when Status is not "ok".
	Error string `json:"error,omitempty"`
	// Size is the file's size in bytes, when Status is "ok".
	Size int64 `json:"size"`
	// Content is a downloaded file's bytes (base64 in JSON).
	Content []byte `json:"content,omitempty"`
}

// FileOK is the Status of a FileResult that succeeded.
const FileOK Code = "ok"
