package remote

import (
	"context"
	"fmt"
	"path"
	"path/filepath"

	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/workspace"
)

// remoteStat is what the kernel reports of a file: size, mtime_ns, inode, ctime_ns.
type remoteStat [4]int64

// syncState is what a placement knows of its kernel's files. It is owned by the
// session's worker.
type syncState struct {
	dir     string // the session's working directory on the remote side
	cwd0    string // the kernel's starting directory
	literal bool   // the kernel cannot read payloads from the request

	pushed map[string]pushedFile // by path below the session directory
	hashed map[string]hostHash   // host files' SHA-256 by path, while their stamp holds
	seen   map[string]seenFile   // outputs, by path below outputs/
	fp     string                // fingerprint of outputs/ when last pulled completely

	contents contentsState
}

// hostHash is a host file's SHA-256 and the stamp it had when it was read.
type hostHash struct {
	stamp workspace.FileStamp
	sha   string
}

type pushedFile struct {
	sha  string
	stat remoteStat
}

type seenFile struct {
	stat    remoteStat
	sha     string
	skipped bool // over MaxFileBytes; reported once per version
}

func (s *syncState) init() {
	s.pushed = map[string]pushedFile{}
	s.hashed = map[string]hostHash{}
	s.seen = map[string]seenFile{}
}

type setupAnswer struct {
	Dir    string `json:"dir"`
	Cwd0   string `json:"cwd0"`
	New    bool   `json:"new"`
	Parent bool   `json:"parent"`
}

// setup makes sure the kernel process has the file-sync module and works in the
// session's directory: <RemoteDir>/<session id> the first time, the same directory
// again for a restarted kernel. It reports whether the kernel process is new to it.
func (p *Placement) setup(ctx context.Context, conn *jupyter.Conn, hostDir string) (bool, error) {
	args := map[string]any{
		"base":  p.b.opts.RemoteDir,
		"sid":   dirName(filepath.Base(hostDir)),
		"known": p.sync.dir,
	}
	p.sync.literal = false // try the payload route; the answer says whether it works
	var ans setupAnswer
	if err := p.op(ctx, conn, "setup", args, []byte{}, &ans); err != nil {
		return false, fmt.Errorf("set up the session directory: %w", err)
	}
	if !path.IsAbs(ans.Dir) {
		return false, fmt.Errorf("set up the session directory: the kernel reported %q", ans.Dir)
	}
	if ans.New && p.sync.dir == "" {
		p.b.log.Info("remote session directory", "session", filepath.Base(hostDir), "gateway", p.gw.name, "dir", ans.Dir)
	}
	p.sync.dir, p.sync.cwd0, p.sync.literal = ans.Dir, ans.Cwd0, !ans.Parent
	return ans.New, nil
}

// dirName makes a session id safe as one remote path element.
func dirName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
