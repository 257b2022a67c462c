package kernelfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"time"

	"github.com/kernelbox/kernelbox/internal/filestamp"
	"github.com/kernelbox/kernelbox/jupyter"
)

// MaxDepth is how many directory levels below outputs/ (and data/) are synced, as
// for the workspace's Collect.
const MaxDepth = 32

// inlineFiles is how many files a probe answer may list inline.
const inlineFiles = 500

// Defaults for the zero values of Options.
const (
	DefaultRemoteDir      = "kernelbox-sessions"
	DefaultMaxFileBytes   = int64(1 << 30)
	DefaultMaxOutputFiles = 10000
	DefaultChunkBytes     = 1 << 20
	DefaultPullChunkBytes = 2 << 20
	DefaultWindow         = 3
	DefaultAbortTimeout   = 5 * time.Second
	DefaultReapAfter      = time.Hour
)

// Uploader saves a file through the Contents API (jupyter.Client does). chunk is 0
// for a whole file in one request, else 1, 2, ... and -1 for the last piece.
type Uploader interface {
	SaveFile(ctx context.Context, path string, data []byte, chunk int) error
}

// Options configures a Syncer. Every zero value means the documented default.
type Options struct {
	// RemoteDir is where the session's working directory is made on the remote
	// side, <RemoteDir>/<session dir name>-<128 random bits in hex>, new and empty
	// for each Syncer: relative to the kernel's starting directory, or absolute.
	// A kernel that is shut down removes its directory. Defaults to
	// "kernelbox-sessions".
	RemoteDir string
	// ReapAfter is how long a session directory under RemoteDir may go without
	// its kernel's heartbeat (refreshed every minute, or a quarter of ReapAfter
	// when that is shorter, while the kernel process lives, however idle its
	// session) before the setup of another session under the same RemoteDir, by
	// any kernelbox, removes it as abandoned: its kernel crashed or its server was
	// killed. A kernel that is shut down removes its directory itself.
	// Defaults to an hour; at least a second.
	ReapAfter time.Duration
	// MaxFileBytes caps each file moved either way: an output over it is skipped
	// with a note, an input over it fails the push. Defaults to 1 GiB.
	MaxFileBytes int64
	// MaxSessionBytes is each session's budget for the files API: an upload
	// that would take the regular files of the kernel's session directory over
	// it is refused with api.ErrQuota (see Limits). Remote kernels have no disk
	// quota of kernelbox's, so this is what bounds a client's uploads. Defaults
	// to 10 GiB.
	MaxSessionBytes int64
	// MaxOutputFiles caps the entries of outputs/ examined per pull. Defaults to
	// 10,000.
	MaxOutputFiles int
	// ChunkBytes is the payload of one write request. The kernel's WebSocket
	// limits messages to 10 MiB by default (base64 adds a third), and Jupyter
	// Server reassembles a client message's WebSocket frames by concatenation,
	// which grows quadratically with the message. Defaults to 1 MiB.
	ChunkBytes int
	// PullChunkBytes is the payload of one read request; at least ChunkBytes.
	// Replies are not subject to the frame reassembly that limits requests, so
	// larger pieces are cheaper. Defaults to 2 MiB.
	PullChunkBytes int
	// Window is how many transfer requests are in flight at once. Defaults to 3.
	Window int
	// AbortTimeout bounds the clean-up of a failed transfer. Defaults to 5 seconds.
	AbortTimeout time.Duration
	// Uploader, when set, uploads inputs through the Contents API if the server
	// writes where the kernel reads (probed once per session); else inputs go
	// through the kernel. Defaults to nil: always through the kernel.
	Uploader Uploader
	// KernelPath is the kernel's starting directory relative to the Contents API's
	// root, for Uploader.
	KernelPath string
	// Logger receives the syncer's logs. Defaults to discarding them.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.RemoteDir == "" {
		o.RemoteDir = DefaultRemoteDir
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxSessionBytes <= 0 {
		o.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if o.MaxOutputFiles <= 0 {
		o.MaxOutputFiles = DefaultMaxOutputFiles
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.PullChunkBytes <= 0 {
		o.PullChunkBytes = DefaultPullChunkBytes
	}
	o.PullChunkBytes = max(o.PullChunkBytes, o.ChunkBytes)
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.AbortTimeout <= 0 {
		o.AbortTimeout = DefaultAbortTimeout
	}
	if o.ReapAfter <= 0 {
		o.ReapAfter = DefaultReapAfter
	}
	o.ReapAfter = max(o.ReapAfter, time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Syncer keeps one session's files in step between its host session directory and
// its remote kernel; it implements the executor's FileSyncer (PushInputs,
// OutputsProbe, PullOutputs). Its methods are called from the session's worker, one
// at a time; the connection is lent to each call and never kept.
type Syncer struct {
	o   Options
	log *slog.Logger
	k   Kernel

	nonce string // names this incarnation's directory, unguessable by other clients
	dir   string // the session's working directory on the remote side
	cwd0  string // the kernel's starting directory

	pushed map[string]pushedFile // by path below the session directory
	hashed map[string]hostHash   // host files' SHA-256 by path, while their stamp holds
	seen   map[string]seenFile   // outputs, by path below outputs/
	fp     string                // fingerprint of outputs/ when last pulled completely

	contents contentsState
}

// hostHash is a host file's SHA-256 and the stamp it had when it was read.
type hostHash struct {
	stamp filestamp.Stamp
	sha   string
}

type pushedFile struct {
	sha  string
	stat Stat
}

type seenFile struct {
	stat    Stat
	sha     string
	skipped bool // over MaxFileBytes; reported once per version
}

// New returns a Syncer for one session.
func New(o Options) *Syncer {
	o.setDefaults()
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	return &Syncer{
		o:      o,
		log:    o.Logger,
		nonce:  hex.EncodeToString(nonce[:]),
		pushed: map[string]pushedFile{},
		hashed: map[string]hostHash{},
		seen:   map[string]seenFile{},
	}
}

// Kernel returns the syncer's client of the kernel side.
func (s *Syncer) Kernel() *Kernel { return &s.k }

// Dir returns the session's directory on the remote side, "" until it is set up.
func (s *Syncer) Dir() string { return s.dir }

// setup makes sure the kernel process has the file-sync module and works in the
// session's directory: a new, empty <RemoteDir>/<session id>-<nonce> the first
// time, the same directory again for a restarted kernel. It reports whether the
// kernel process is new to it.
func (s *Syncer) setup(ctx context.Context, conn *jupyter.Conn, hostDir string) (bool, error) {
	ans, err := s.k.Setup(ctx, conn, SetupRequest{
		Base: s.o.RemoteDir, SID: dirName(filepath.Base(hostDir)), Nonce: s.nonce, Known: s.dir,
		Reap: s.o.ReapAfter.Seconds(),
	})
	if err != nil {
		return false, fmt.Errorf("set up the session directory: %w", err)
	}
	if !path.IsAbs(ans.Dir) {
		return false, fmt.Errorf("set up the session directory: the kernel reported %q", ans.Dir)
	}
	switch {
	case ans.New && s.dir == "":
		s.log.Info("remote session directory", "session", filepath.Base(hostDir), "dir", ans.Dir)
	case ans.Made:
		s.log.Warn("remote session directory was gone (reaped while its kernel was down?); made it again", "session", filepath.Base(hostDir), "dir", ans.Dir)
	}
	s.dir, s.cwd0 = ans.Dir, ans.Cwd0
	return ans.New, nil
}

// dirName makes a session id safe as the first part of a remote path element.
func dirName(id string) string {
	b := []byte(id)
	if len(b) > 200 {
		b = b[:200]
	}
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
