package mcpserver

import (
	"github.com/kernelbox/kernelbox/api"

	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/kernelbox/kernelbox/workspace"
)

// ArtifactURITemplate is the URI template of artifact resources. {+path} is a
// reserved expansion, so the path may hold slashes (display/cell1-….png).
const ArtifactURITemplate = "kernelbox://artifacts/{session}/{+path}"

const artifactURIPrefix = "kernelbox://artifacts/"

// ArtifactURI returns the resource URI of the artifact name (slash-separated,
// relative to the session's artifacts) of session: kernelbox://artifacts/<session>/<name>,
// each path element percent-encoded.
func ArtifactURI(session, name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return artifactURIPrefix + url.PathEscape(session) + "/" + strings.Join(parts, "/")
}

// parseArtifactURI splits an artifact URI into session and name. The name is
// checked by the workspace when it is opened.
func parseArtifactURI(uri string) (session, name string, err error) {
	return parseURI(uri, artifactURIPrefix, ArtifactURITemplate)
}

// parseURI splits a resource URI of the form prefix + session/path (template)
// into its session and path, percent-decoded.
func parseURI(uri, prefix, template string) (session, name string, err error) {
	rest, ok := strings.CutPrefix(uri, prefix)
	if !ok {
		return "", "", fmt.Errorf("not a %s URI: %q", template, uri)
	}
	sess, p, ok := strings.Cut(rest, "/")
	if !ok || sess == "" || p == "" {
		return "", "", fmt.Errorf("resource URI %q: want %s", uri, template)
	}
	if session, err = url.PathUnescape(sess); err != nil {
		return "", "", fmt.Errorf("resource URI %q: %v", uri, err)
	}
	if name, err = url.PathUnescape(p); err != nil {
		return "", "", fmt.Errorf("resource URI %q: %v", uri, err)
	}
	return session, name, nil
}

// ArtifactList is list_artifacts' structured result.
type ArtifactList struct {
	SessionID string         `json:"session_id"`
	Artifacts []ArtifactInfo `json:"artifacts" jsonschema:"Every artifact of the session, sorted by name."`
}

// ListArtifactsArgs are list_artifacts' arguments.
type ListArtifactsArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"The session whose artifacts to list. Defaults to \"default\"."`
}

// ReadArtifactArgs are read_artifact's arguments.
type ReadArtifactArgs struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"The session the artifact belongs to. Defaults to \"default\"."`
	Name      string `json:"name" jsonschema:"The artifact's name as listed (its path under outputs/, or display/<file> for a saved figure), e.g. \"report.csv\" or \"display/cell3-1a2b3c4d-1.png\"."`
	Offset    int64  `json:"offset,omitempty" jsonschema:"For text files: the byte offset to start reading at, to page through a long file. Defaults to 0."`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"For text files: how many bytes to return, at most the server's text budget (which is also the default)."`
}

func (s *server) addArtifacts(srv *mcp.Server) {
	sess := mustSchema[ListArtifactsArgs](nil)
	sess.Properties["session_id"].Pattern = api.SessionIDPattern
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_artifacts",
		Title:       "List a session's artifacts",
		Description: `List every artifact of a session: the files its code wrote under outputs/ (by their path there) and the figures it displayed (display/...), with size, media type, host path and resource URI. Artifacts outlive the session's kernel. Read one with read_artifact.`,
		InputSchema: sess,
		Annotations: &mcp.ToolAnnotations{Title: "List a session's artifacts", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.listArtifacts)

	read := mustSchema[ReadArtifactArgs](nil)
	read.Properties["session_id"].Pattern = api.SessionIDPattern
	read.Properties["offset"].Minimum = ptr(0.0)
	read.Properties["max_bytes"].Minimum = ptr(1.0)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "read_artifact",
		Title: "Read an artifact",
		Description: fmt.Sprintf(`Read one artifact of a session. Text files (CSV, JSON, Markdown, logs, HTML, ...) are returned as text, at most %s bytes per call: a longer file ends with a note giving the offset to continue from. Images up to %s are returned as images. Other files are described and returned as a resource link (kernelbox://artifacts/<session>/<name>).`,
			count(s.opts.MaxTextBytes), humanBytes(int64(s.opts.MaxImageBytes))),
		InputSchema: read,
		Annotations: &mcp.ToolAnnotations{Title: "Read an artifact", ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, s.readArtifact)

	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "artifact",
		Title:       "kernelbox artifact",
		URITemplate: ArtifactURITemplate,
		Description: "A file a session's code wrote under outputs/ (name = its path there), or a figure it displayed (display/<file>).",
	}, s.readResource)
}

func ptr[T any](v T) *T { return &v }

func (s *server) listArtifacts(ctx context.Context, req *mcp.CallToolRequest, args ListArtifactsArgs) (*mcp.CallToolResult, *ArtifactList, error) {
	if args.SessionID == "" {
		args.SessionID = DefaultSession
	}
	arts, err := s.ws.Artifacts(args.SessionID)
	if err != nil {
		return nil, nil, fmt.Errorf("list artifacts of %q: %v", args.SessionID, err)
	}
	list := &ArtifactList{SessionID: args.SessionID, Artifacts: make([]ArtifactInfo, len(arts))}
	var b strings.Builder
	if len(arts) == 0 {
		fmt.Fprintf(&b, "Session %q has no artifacts. Files the code writes under outputs/ become artifacts.", args.SessionID)
	} else {
		fmt.Fprintf(&b, "Session %q has %d artifact(s):\n", args.SessionID, len(arts))
	}
	for i, a := range arts {
		info := ArtifactInfo{Name: a.Name, URI: ArtifactURI(args.SessionID, a.Name), Path: a.Path, Size: a.Size, MIME: a.MIME, SHA256: a.SHA256}
		list.Artifacts[i] = info
		fmt.Fprintf(&b, "- %s (%s, %s) %s\n", info.Name, info.MIME, humanBytes(info.Size), info.URI)
	}
	return text("%s", b.String()), list, nil
}

// readArtifact is the read_artifact handler.
func (s *server) readArtifact(ctx context.Context, req *mcp.CallToolRequest, args ReadArtifactArgs) (*mcp.CallToolResult, any, error) {
	if args.SessionID == "" {
		args.SessionID = DefaultSession
	}
	f, err := s.ws.OpenArtifact(args.SessionID, args.Name)
	if err != nil {
		return nil, nil, artifactError(args.SessionID, args.Name, err)
	}
	defer f.Close()
	of, err := osFile(f)
	if err != nil {
		return nil, nil, err
	}
	host := filepath.Join(s.ws.ArtifactsDir(), args.SessionID, filepath.FromSlash(args.Name))
	res, err := s.show(shown{
		f: of, name: args.Name, uri: ArtifactURI(args.SessionID, args.Name), tool: "read_artifact",
		elsewhere: fmt.Sprintf("its host path %s. To inspect it, load it with Python in the session while it is still under outputs/", host),
	}, args.Offset, args.MaxBytes)
	return res, nil, err
}

// readResource serves resources/read for artifact URIs.
func (s *server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	session, name, err := parseArtifactURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	f, err := s.ws.OpenArtifact(session, name)
	if err != nil {
		if errors.Is(err, workspace.ErrNotFound) || errors.Is(err, workspace.ErrInvalidPath) || errors.Is(err, workspace.ErrInvalidSession) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	defer f.Close()
	of, err := osFile(f)
	if err != nil {
		return nil, err
	}
	return s.resourceContents(uri, of, name, "read_artifact")
}

// artifactError explains a failed open in words a model can act on.
func artifactError(session, name string, err error) error {
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return fmt.Errorf("session %q has no artifact %q; list_artifacts shows its artifacts (names are paths under outputs/, or display/<file>)", session, name)
	case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrInvalidSession), errors.Is(err, api.ErrInvalidRequest):
		return fmt.Errorf("invalid artifact name %q of session %q: give the name as list_artifacts shows it (a relative path without . or .. elements)", name, session)
	default:
		return fmt.Errorf("read artifact %q of session %q: %v", name, session, err)
	}
}

// kind returns a file's media type (from its extension, else sniffed) and whether
// it reads as text.
func kind(head []byte, name string) (string, bool) {
	mt := mime.TypeByExtension(path.Ext(name))
	if mt == "" {
		mt = http.DetectContentType(head)
	}
	base, _, _ := mime.ParseMediaType(mt)
	switch {
	case strings.HasPrefix(base, "text/"),
		base == "application/json", base == "application/xml", base == "application/javascript",
		base == "application/x-ipynb+json", base == "image/svg+xml",
		strings.HasSuffix(base, "+json"), strings.HasSuffix(base, "+xml"):
		return mt, true
	case base == "application/octet-stream":
		// Unknown extension: text if the head is valid UTF-8 without NULs.
		return mt, utf8.Valid(trimPartialRune(head)) && !strings.ContainsRune(string(head), 0)
	}
	return mt, false
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// isInlineImage reports whether media type mt is an image a client can show inline
// (api.RichTypes).
func isInlineImage(mt string) bool {
	base, _, _ := mime.ParseMediaType(mt)
	t, ok := api.RichTypeOf(base)
	return ok && t.Image
}
