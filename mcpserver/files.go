package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// The session files tools: list_files, read_file and write_file work on the
// session's own directory (the kernel's working directory) through the same
// executor operations as the HTTP files API (Executor.ListFiles, GetFile,
// PutFile), so the permission policy (files.read, files.write), the path rules
// and the limits are the same, and so are the error codes.

// FileURITemplate is the URI template of session file resources.
const FileURITemplate = "kernelbox://files/{session}/{+path}"

const fileURIPrefix = "kernelbox://files/"

// FileURI returns the resource URI of the file path (relative to the session
// directory) of session, each path element percent-encoded.
func FileURI(session, path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return fileURIPrefix + url.PathEscape(session) + "/" + strings.Join(parts, "/")
}

// DefaultMaxWriteBytes is the default of Options.MaxWriteBytes.
const DefaultMaxWriteBytes = 1 << 20

// maxListEntries bounds the entries one list_files answer carries.
const maxListEntries = 1000

// pathRules is what every files tool says about paths.
const pathRules = `Paths are relative to the session's working directory (the kernel's current directory, where inputs/ and outputs/ are), "/"-separated, e.g. "inputs/data.csv": no leading "/", no "." or ".." element, no empty element, no NUL, valid UTF-8, at most 4096 bytes and 255 per element. Symbolic links are never followed (one anywhere on the path is refused), and FIFOs, sockets and devices are refused.`

// FileInfo is one entry of list_files.
type FileInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type" jsonschema:"file, dir, symlink (never followed: read_file refuses it) or other (a FIFO, socket or device)."`
	Size    int64  `json:"size"`
	ModTime string `json:"mtime" jsonschema:"Last modification time, RFC 3339."`
}

// FileList is list_files' structured result.
type FileList struct {
	SessionID string     `json:"session_id"`
	Dir       string     `json:"dir" jsonschema:"The directory listed, relative to the session directory (\"\" for the session directory)."`
	Entries   []FileInfo `json:"entries" jsonschema:"Sorted by name."`
	Truncated bool       `json:"truncated" jsonschema:"The directory has more entries than were listed."`
}

// ListFilesArgs are list_files' arguments.
type ListFilesArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"The session. Defaults to \"default\"."`
	Dir       string `json:"dir,omitempty" jsonschema:"The directory to list, relative to the session directory, e.g. \"inputs\". Defaults to the session directory itself."`
}

// ReadFileArgs are read_file's arguments.
type ReadFileArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"The session. Defaults to \"default\"."`
	Path      string `json:"path" jsonschema:"The file, relative to the session directory, e.g. \"outputs/report.md\"."`
	Offset    int64  `json:"offset,omitempty" jsonschema:"For text files: the byte offset to start reading at, to page through a long file. Defaults to 0."`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"For text files: how many bytes to return, at most the server's text budget (which is also the default)."`
}

// WriteFileArgs are write_file's arguments.
type WriteFileArgs struct {
	SessionID   string `json:"session_id,omitempty" jsonschema:"The session; created if it does not exist yet (its kernel starts with its first execute_code). Defaults to \"default\"."`
	Path        string `json:"path" jsonschema:"The file to write, relative to the session directory, e.g. \"inputs/params.json\". Missing parent directories are created."`
	Content     string `json:"content" jsonschema:"The file's whole content, as text (written as UTF-8)."`
	NoOverwrite bool   `json:"no_overwrite,omitempty" jsonschema:"Refuse (error exists) if something is already at path. Defaults to false: an existing file is replaced."`
}

func (s *server) addFiles(srv *mcp.Server) {
	list := mustSchema[ListFilesArgs](nil)
	list.Properties["session_id"].Pattern = api.SessionIDPattern
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "list_files",
		Title: "List a session's files",
		Description: fmt.Sprintf(`List a directory of a session's working directory: the files its code wrote anywhere (not only outputs/), its inputs, and what write_file put there, with type, size and modification time (at most %s entries). Read one with read_file. This is the session's live directory, not its artifacts (list_artifacts).

%s`, count(maxListEntries), pathRules),
		InputSchema: list,
		Annotations: &mcp.ToolAnnotations{Title: "List a session's files", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.listFiles)

	read := mustSchema[ReadFileArgs](nil)
	read.Properties["session_id"].Pattern = api.SessionIDPattern
	read.Properties["offset"].Minimum = ptr(0.0)
	read.Properties["max_bytes"].Minimum = ptr(1.0)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "read_file",
		Title: "Read a session file",
		Description: fmt.Sprintf(`Read one file of a session's working directory. Text files are returned as text, at most %s bytes per call: a longer file ends with a note giving the offset to continue from, and a resource link to the whole file. Images up to %s are returned as images. Other (binary) files are described and returned as a resource link (kernelbox://files/<session>/<path>); load those with Python in the session instead.

%s`, count(s.opts.MaxTextBytes), humanBytes(int64(s.opts.MaxImageBytes)), pathRules),
		InputSchema: read,
		Annotations: &mcp.ToolAnnotations{Title: "Read a session file", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.readFile)

	write := mustSchema[WriteFileArgs](nil)
	write.Properties["session_id"].Pattern = api.SessionIDPattern
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "write_file",
		Title: "Write a session file",
		Description: fmt.Sprintf(`Write a text file into a session's working directory, for its code to read (e.g. write "inputs/config.json", then open("inputs/config.json") in execute_code). The whole file is written at once (atomically: the code never sees half of it), replacing one that is there unless no_overwrite is set; parent directories are created. At most %s of content; for more, or for binary data, let the code produce it, or upload it with kernelbox cp or the HTTP files API.

%s`, humanBytes(int64(s.opts.MaxWriteBytes)), pathRules),
		InputSchema: write,
		Annotations: &mcp.ToolAnnotations{Title: "Write a session file", DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, s.writeFile)

	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "session-file",
		Title:       "kernelbox session file",
		URITemplate: FileURITemplate,
		Description: "A file in a session's working directory (path relative to it).",
	}, s.readFileResource)
}

func (s *server) listFiles(ctx context.Context, req *mcp.CallToolRequest, args ListFilesArgs) (*mcp.CallToolResult, *FileList, error) {
	if args.SessionID == "" {
		args.SessionID = DefaultSession
	}
	l, err := s.e.ListFiles(ctx, args.SessionID, args.Dir, maxListEntries)
	if err != nil {
		return nil, nil, s.filesError("list", args.SessionID, args.Dir, err)
	}
	out := &FileList{SessionID: args.SessionID, Dir: l.Path, Entries: []FileInfo{}, Truncated: l.Truncated}
	where := "the session directory"
	if l.Path != "" {
		where = fmt.Sprintf("%q", l.Path)
	}
	var b strings.Builder
	if len(l.Entries) == 0 {
		fmt.Fprintf(&b, "%s of session %q is empty.\n", where, args.SessionID)
	} else {
		fmt.Fprintf(&b, "%s of session %q:\n", where, args.SessionID)
	}
	budget := s.opts.MaxTextBytes - 200
	for i, e := range l.Entries {
		line := "- " + e.Name
		switch e.Type {
		case "dir":
			line += "/\n"
		case "file":
			line += fmt.Sprintf(" (%s, %s)\n", humanBytes(e.Size), e.ModTime.UTC().Format(time.RFC3339))
		default:
			line += " (" + e.Type + ", not readable here)\n"
		}
		if b.Len()+len(line) > budget {
			fmt.Fprintf(&b, "... and %d more entries, not shown (over the answer's text budget): list a subdirectory\n", len(l.Entries)-i)
			out.Truncated = true
			break
		}
		b.WriteString(line)
		out.Entries = append(out.Entries, FileInfo{Name: e.Name, Type: e.Type, Size: e.Size, ModTime: e.ModTime.UTC().Format(time.RFC3339)})
	}
	if l.Truncated {
		fmt.Fprintf(&b, "(the directory has more than %s entries; only the first are listed)\n", count(maxListEntries))
	}
	return text("%s", b.String()), out, nil
}

func (s *server) readFile(ctx context.Context, req *mcp.CallToolRequest, args ReadFileArgs) (*mcp.CallToolResult, any, error) {
	if args.SessionID == "" {
		args.SessionID = DefaultSession
	}
	f, size, err := s.e.GetFile(ctx, args.SessionID, args.Path)
	if err != nil {
		return nil, nil, s.filesError("read", args.SessionID, args.Path, err)
	}
	defer f.Close()
	res, err := s.show(shown{
		f: streamFile(f, size), name: args.Path, uri: FileURI(args.SessionID, args.Path), tool: "read_file", linkClipped: true,
		elsewhere: fmt.Sprintf("the code can open it as %q", args.Path),
	}, args.Offset, args.MaxBytes)
	return res, nil, err
}

func (s *server) writeFile(ctx context.Context, req *mcp.CallToolRequest, args WriteFileArgs) (*mcp.CallToolResult, any, error) {
	if args.SessionID == "" {
		args.SessionID = DefaultSession
	}
	if len(args.Content) > s.opts.MaxWriteBytes {
		return nil, nil, fmt.Errorf("%s: write %q of session %q: the content is %s, over write_file's limit of %s; nothing was written. Let the code produce the file, or upload it with kernelbox cp or the HTTP files API",
			api.CodeTooLarge, args.Path, args.SessionID, humanBytes(int64(len(args.Content))), humanBytes(int64(s.opts.MaxWriteBytes)))
	}
	n, err := s.e.PutFile(ctx, args.SessionID, args.Path, strings.NewReader(args.Content), api.PutOptions{NoOverwrite: args.NoOverwrite})
	if err != nil {
		return nil, nil, s.filesError("write", args.SessionID, args.Path, err)
	}
	return text("Wrote %s to %q in session %q; its code opens it as %q.", humanBytes(n), args.Path, args.SessionID, args.Path), nil, nil
}

// readFileResource serves resources/read for session file URIs.
func (s *server) readFileResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	session, path, err := parseURI(uri, fileURIPrefix, FileURITemplate)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	f, size, err := s.e.GetFile(ctx, session, path)
	if err != nil {
		if code, _ := executor.ErrorCode(err); code == api.CodeNotFound || code == api.CodeInvalidPath {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, s.filesError("read", session, path, err)
	}
	defer f.Close()
	return s.resourceContents(uri, streamFile(f, size), path, "read_file")
}

// filesError explains a failed files operation in words a model can act on,
// beginning with the error code the HTTP API would answer.
func (s *server) filesError(op, session, path string, err error) error {
	code, _ := executor.ErrorCode(err)
	var hint string
	switch code {
	case api.CodeInvalidPath:
		hint = pathRules
	case api.CodeNotFound:
		if _, serr := s.e.Session(session); errors.Is(serr, api.ErrNotFound) {
			hint = "the session does not exist (list_sessions shows the live ones; write_file or execute_code creates one)"
		} else {
			hint = "nothing is at that path: list_files shows what is there"
		}
	case api.CodeIsDirectory:
		hint = "it is a directory: list it with list_files"
	case api.CodeNotDirectory:
		hint = "an element of the path is a file where a directory is needed"
	case api.CodeExists:
		hint = "no_overwrite is set and something is already at that path; nothing was written"
	case api.CodeQuota:
		hint = "the session's disk is full; nothing was written. Delete files the session no longer needs (from its code)"
	case api.CodeTooLarge:
		hint = "over the server's per-file limit; nothing was written"
	case api.CodeDenied:
		hint = "the server's permission policy does not allow this (files.read to list and read, files.write to write); retrying will not help"
	}
	msg := fmt.Sprintf("%s: %s %q of session %q: %v", code, op, path, session, err)
	if hint != "" {
		msg += ". " + hint
	}
	return errors.New(msg)
}
