package remote

// Keeping sessions across a restart of kernelbox (issue 34 item 1), where the
// gateway keeps its kernels. With Options.StateFile set, the backend keeps, in
// that file, what taking each session's kernel back needs: the session, the
// gateway's URL as configured, the kernel's id and kernelspec, and the session's
// directory in the kernel (whose name holds 128 random bits this kernelbox drew:
// reattach.go recognises its own kernels by it). The gateway's token is never
// written: the next start takes it from its configuration, so a kernel whose
// gateway is no longer configured cannot be taken back. The file is rewritten
// whole (temporary file, fsync, rename, 0600) each time a session's kernel or
// directory changes or its placement closes, so that a SIGKILL at any moment
// leaves either the old list or the new one; New reads it, Reattach takes the
// kernels back.

import (
	"fmt"
	"path"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/executor"
)

// ErrStateInUse is returned (wrapped) by New when another backend, in this
// process or another kernelbox on the host, holds the state file
// (Options.StateFile, keep.Lock): two servers must not share the same
// sessions.
var ErrStateInUse = keep.ErrInUse

// keptVersion is the state file's format version; another version is refused.
const keptVersion = 1

// keptState is the state file.
type keptState struct {
	Version int          `json:"version"`
	Kernels []keptKernel `json:"kernels"`
}

// keptKernel is one session's kernel as the state file lists it.
type keptKernel struct {
	Session string `json:"session"`
	// Gateway is the gateway's URL as configured (without a trailing slash); a
	// URL never holds a token (Options.validate refuses user info and queries).
	Gateway  string    `json:"gateway"`
	KernelID string    `json:"kernel_id"`
	Kernel   string    `json:"kernel_name"`
	Dir      string    `json:"dir"` // the session's directory in the kernel (kernelfs)
	Started  time.Time `json:"started"`
}

// sessionDirRe is the last element of a session directory kernelfs makes:
// <session>-<128 random bits in hex>.
var sessionDirRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}-[0-9a-f]{32}$`)

// check refuses a record that does not have the shape the backend writes, so that
// a tampered file cannot steer the backend to a made-up URL, kernel path or
// directory.
func (k keptKernel) check() error {
	if err := keep.CheckSession(k.Session); err != nil {
		return err
	}
	_, idErr := uuid.Parse(k.KernelID)
	switch {
	case checkURL(k.Gateway) != nil || redact(k.Gateway) != k.Gateway:
		return fmt.Errorf("session %s: gateway %q is not a gateway URL", k.Session, redact(k.Gateway))
	case idErr != nil:
		return fmt.Errorf("session %s: kernel id %q is malformed", k.Session, k.KernelID)
	case k.Kernel != "" && executor.CheckKernelName(k.Kernel) != nil:
		return fmt.Errorf("session %s: kernel name %q is malformed", k.Session, k.Kernel)
	case !path.IsAbs(k.Dir) || path.Clean(k.Dir) != k.Dir || !sessionDirRe.MatchString(path.Base(k.Dir)):
		return fmt.Errorf("session %s: directory %q is not a session directory", k.Session, k.Dir)
	}
	return nil
}

// readKept reads the state file at path. A missing file (or no path) is no state
// and no error. Any other failure (unreadable, a link, too big, corrupt, another
// format) is an error: nothing in it is taken back. Records of the wrong shape
// are dropped and reported in skipped.
func readKept(path string) (kept []keptKernel, skipped []string, err error) {
	var st keptState
	if ok, err := keep.Read(path, &st); !ok || err != nil {
		return nil, nil, err
	}
	if err := keep.CheckVersion(path, st.Version, keptVersion); err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, k := range st.Kernels {
		if err := k.check(); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		if seen[k.Session] || seen[k.Gateway+"/"+k.KernelID] {
			skipped = append(skipped, fmt.Sprintf("session %s: listed twice, or its kernel is", k.Session))
			continue
		}
		seen[k.Session], seen[k.Gateway+"/"+k.KernelID] = true, true
		kept = append(kept, k)
	}
	return kept, skipped, nil
}

// record returns p as the state file lists it, or false for a placement that is
// not a live session's kernel whose directory is set up (a warm pool's, one
// closed or lost, one whose first call has not reached its kernel).
func (p *Placement) record() (keptKernel, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.released || !api.ValidSessionID(p.session) || p.kernelID == "" || p.dir == "" || p.loss.Reason() != "" {
		return keptKernel{}, false
	}
	return keptKernel{Session: p.session, Gateway: p.gw.url, KernelID: p.kernelID, Kernel: p.server.KernelName,
		Dir: p.dir, Started: p.started}, true
}

// noteKernel records the kernel and directory the session's last file sync
// reached (on the session's worker, after it) and rewrites the state file when
// they changed: a new kernel, or a first call.
func (p *Placement) noteKernel() {
	id, dir := p.KernelID(), p.Files.Dir()
	p.mu.Lock()
	changed := id != p.kernelID || dir != p.dir
	p.kernelID, p.dir = id, dir
	p.mu.Unlock()
	if changed {
		p.b.saveKept()
	}
}

// saveKept writes the state file with the backend's live sessions' kernels. A
// failure is logged: the kernels then cannot be taken back by the next start.
func (b *Backend) saveKept() {
	if b.opts.StateFile == "" {
		return
	}
	b.keptFile.Save(func() { b.writeKept(b.placementList()) })
}

// writeKept writes the state file listing the kernels of list; it runs through
// b.keptFile.
func (b *Backend) writeKept(list []*Placement) {
	st := keptState{Version: keptVersion, Kernels: []keptKernel{}}
	for _, p := range list {
		if k, ok := p.record(); ok {
			st.Kernels = append(st.Kernels, k)
		}
	}
	keep.Write(b.log, b.opts.StateFile, st)
}

// placementList returns every gateway's placements.
func (b *Backend) placementList() []*Placement {
	var out []*Placement
	for _, g := range b.gateways {
		g.mu.Lock()
		for p := range g.placements {
			out = append(out, p)
		}
		g.mu.Unlock()
	}
	return out
}
