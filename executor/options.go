package executor

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/permissions"
	"github.com/kernelbox/kernelbox/workspace"
)

// Options configures an Executor. Backend and Workspace are required; every other
// zero value means the documented default.
type Options struct {
	// Backend provides a Jupyter server per session. Nil disables execution:
	// every call fails with api.ErrDisabled.
	Backend Backend

	// Workspace owns the session directories and the artifacts directory.
	Workspace *workspace.Manager

	// Permissions checks every call and every input. Defaults to the built-in
	// policy (reads allowed under the current directory, secrets denied, no
	// approver so anything unmatched is denied).
	Permissions *permissions.Engine

	// Data lists host directories exposed read-only in every session at
	// data/<Name>. They are subject to the permission policy (filesystem.read).
	Data []DataMount

	// Kernel is the kernelspec every session's kernel runs (SessionSpec.Template.Kernel), for
	// example "ir" for R. Defaults to "": the backend's Python kernel. A kernel
	// whose kernel_info says it is not Python is sent nothing but each call's code
	// (none of kernelbox's Python user expressions).
	Kernel string

	// DefaultTimeout bounds a call whose request sets none. Defaults to 5 minutes.
	DefaultTimeout time.Duration
	// MaxTimeout caps any call's timeout. Defaults to 1 hour.
	MaxTimeout time.Duration
	// InterruptGrace is how long a timed-out call may take to stop after its
	// kernel is interrupted before the kernel is restarted. Defaults to 3 seconds.
	InterruptGrace time.Duration
	// MaxStarting is how many session kernels may be starting at once (placed,
	// started, connected and prepared, preload included); further starts wait
	// for a slot, within their StartTimeout and their call's own bound. Defaults
	// to the backend's StartLimiter.MaxStarting when it has one, else no limit;
	// negative means no limit.
	MaxStarting int

	// StartTimeout bounds starting a session's kernel: placing it (server or
	// container included), starting and connecting to it, and its template's
	// environment and preload. Defaults to DefaultStartTimeout (2 minutes).
	StartTimeout time.Duration
	// ConnectTimeout bounds connecting to a kernel (after a start, a restart or a
	// death the server recovered from), and each step of it (the WebSocket dial,
	// kernel_info, the probe execution) is given a third of it: a server that
	// accepts a connection and then says nothing ends the start or call with a
	// StepTimeoutError naming the step, instead of holding it until StartTimeout.
	// A third of it, at most 3 seconds, is also how long the check before
	// a call waits for a kernel idle since the previous one, and then its server,
	// to answer. Defaults to DefaultConnectTimeout (60 seconds).
	ConnectTimeout time.Duration
	// PreloadTimeout bounds, in each fresh kernel, the preload of a template that
	// sets no Template.PreloadTimeout (with the environment set by code, when the
	// backend does not set it): a start whose preload runs longer fails with a
	// PreloadTimeoutError, naming the template and the bound, instead of holding
	// its caller (and, for a warm kernel, its pool) until StartTimeout. It must
	// be shorter than StartTimeout. Defaults to DefaultPreloadTimeout (60
	// seconds), or half of StartTimeout when StartTimeout is under 2 minutes.
	PreloadTimeout time.Duration

	// WarmTurn is how long one warm kernel's start keeps the executor's single
	// warm-start turn. Warm kernels are started one at a time, whichever their
	// template, and only while no call runs; a start still going after WarmTurn
	// (a slow or hung preload) gives the turn up and goes on beside the next one,
	// within its own preload and start timeouts, so that one template's start
	// never holds up another template's pool for longer than WarmTurn. Defaults
	// to DefaultWarmTurn (5 seconds).
	WarmTurn time.Duration

	// MaxCodeBytes caps the size of a call's code. Defaults to 1 MiB.
	MaxCodeBytes int
	// MaxInputs caps the number of inputs of one call. Defaults to 100.
	MaxInputs int
	// MaxStreamBytes caps the stdout+stderr text kept per call; the rest is
	// dropped and the result marked truncated. Defaults to 8 MiB.
	MaxStreamBytes int
	// MaxOutputs caps the number of outputs kept per call. Defaults to 1000.
	MaxOutputs int
	// MaxRichBytes caps the rich output (images, HTML) kept per call.
	// Defaults to 32 MiB.
	MaxRichBytes int

	// MaxSessions caps the number of live sessions. Defaults to one per 384 MiB of
	// physical memory, between 4 and 64.
	MaxSessions int
	// QueueSize caps the calls waiting behind a session's running call.
	// Defaults to 16.
	QueueSize int
	// IdleTimeout closes sessions idle for that long (their files and artifacts
	// stay on disk). Defaults to 30 minutes; negative disables culling.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds Close. Defaults to 20 seconds.
	ShutdownTimeout time.Duration

	// HibernateAfter hibernates sessions of the default template idle for that
	// long, when they can (Python, on a backend whose kernels write into the
	// session directory): their namespace is saved and their kernel stopped,
	// instead of their being closed at IdleTimeout. Defaults to 0: off.
	HibernateAfter time.Duration
	// HibernatedRetention closes a session hibernated for that long (its files
	// stay, its snapshot is deleted). Defaults to 7 days; negative keeps them.
	HibernatedRetention time.Duration
	// SnapshotMaxBytes caps a session's snapshot: a bigger namespace is not
	// saved (api.ErrSnapshotTooLarge). Defaults to the workspace's disk quota when
	// it has one, else 8 GiB.
	SnapshotMaxBytes int64
	// Checkpoint is the checkpoint setting of templates that set none (see
	// Template.Checkpoint). Defaults to "": off.
	Checkpoint string
	// CheckpointTimeout bounds one after-call checkpoint: one that takes longer
	// is stopped (the kernel is interrupted) and skipped with a note. Defaults
	// to 60 seconds.
	CheckpointTimeout time.Duration
	// SnapshotTimeout bounds saving one snapshot in the kernel (a hibernate, a
	// fork's save): one that takes longer (a __getstate__ that blocks) is
	// interrupted, its temporary file removed, and the session stays live.
	// Defaults to 2 minutes (a 1 GiB namespace saves in about 4 s).
	SnapshotTimeout time.Duration
	// RestoreTimeout bounds loading one snapshot (or checkpoint) in a new
	// kernel; past it the session stays hibernated with its snapshot
	// (api.ErrCannotResume). Defaults to 10 minutes.
	RestoreTimeout time.Duration
	// MaxHibernated bounds the hibernated sessions kept at once: a hibernate
	// past it is refused (api.ErrCannotHibernate, the session stays live; an idle
	// one is closed as before, told), never made room for by deleting another.
	// Hibernated sessions are kept for HibernatedRetention, their directories
	// never evicted for the workspace's MaxKeptSessions. Defaults to 1,000.
	MaxHibernated int

	// Warm keeps that many kernels started ahead of need, so that a new
	// session's first call does not wait for a kernel to start. Defaults to 0.
	// It is the default template's warm pool size unless Templates sets one.
	Warm int

	// Templates are the named session shapes callers may choose (see Template).
	// The template named api.DefaultTemplateName, when absent, is made from these
	// Options. Defaults to that one alone.
	Templates []Template

	// Limits are the server's own per-session settings (the backend's), which
	// TemplateInfos shows as a template's effective values where it sets none.
	// Defaults to none known.
	Limits Limits

	// Observer receives events for metrics. Defaults to none.
	Observer Observer

	// StateDir is a directory private to this server (0700) where the executor
	// keeps which session runs which kernel with which template, and which
	// sessions are hibernated (keepstate.go), so that an executor made again
	// with the same StateDir after this one ended (SIGKILL, or Close with
	// StopKeep or StopHibernate) takes its sessions back: a Reattacher backend's
	// running kernels, and hibernated sessions. Defaults to "": no session
	// outlives the executor.
	StateDir string

	// OnClose is what Close does with the live sessions. Defaults to StopClose.
	OnClose StopPolicy

	// Logger receives the executor's logs. Defaults to discarding them.
	Logger *slog.Logger
}

// Defaults of the Options fields that bound kernel starts.
const (
	DefaultStartTimeout   = 2 * time.Minute
	DefaultPreloadTimeout = 60 * time.Second
	DefaultWarmTurn       = 5 * time.Second
	DefaultConnectTimeout = 60 * time.Second
)

func (o *Options) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DefaultTimeout, 5*time.Minute)
	def(&o.MaxTimeout, time.Hour)
	def(&o.InterruptGrace, 3*time.Second)
	def(&o.StartTimeout, DefaultStartTimeout)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	if o.PreloadTimeout == 0 {
		o.PreloadTimeout = min(DefaultPreloadTimeout, o.StartTimeout/2)
	}
	def(&o.WarmTurn, DefaultWarmTurn)
	def(&o.IdleTimeout, 30*time.Minute)
	def(&o.ShutdownTimeout, 20*time.Second)
	def(&o.HibernatedRetention, 7*24*time.Hour)
	def(&o.SnapshotTimeout, 2*time.Minute)
	def(&o.RestoreTimeout, 10*time.Minute)
	defInt(&o.MaxHibernated, 1000)
	def(&o.CheckpointTimeout, time.Minute)
	defInt(&o.MaxCodeBytes, 1<<20)
	defInt(&o.MaxInputs, 100)
	defInt(&o.MaxStreamBytes, 8<<20)
	defInt(&o.MaxOutputs, 1000)
	defInt(&o.MaxRichBytes, 32<<20)
	defInt(&o.MaxSessions, defaultMaxSessions())
	defInt(&o.QueueSize, 16)
	if o.Warm < 0 {
		o.Warm = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
}

// defaultMaxSessions allows one session per 384 MiB of physical memory (a kernel
// takes 70-80 MB idle; data work takes more), between 4 and 64.
func defaultMaxSessions() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 16
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				break
			}
			return min(max(int(kb/(384<<10)), 4), 64)
		}
	}
	return 16
}
