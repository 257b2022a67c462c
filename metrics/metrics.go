// Package metrics counts what an Executor does and serves it in the Prometheus text
// format. Start reading at [New]: a [Metrics] is an executor.Observer (set it as
// executor.Options.Observer), takes permission decisions through
// [Metrics.ObserveDecision] (set it as permissions.Engine.OnDecision), reports the
// sessions by state at scrape time from [Metrics.WatchSessions], and serves all of it
// from [Metrics.Handler].
//
// Every Metrics has its own registry: nothing is registered globally, so several can
// live in one process (and in one test binary).
package metrics

import (
	"github.com/kernelbox/kernelbox/api"

	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/permissions"
)

// Options configures Metrics. The zero value works.
type Options struct {
	// Namespace prefixes every metric name. Defaults to "kernelbox".
	Namespace string

	// Buckets are the upper bounds, in seconds, of the execution latency
	// histogram. Defaults to DefaultBuckets.
	Buckets []float64

	// NoRuntime leaves out the Go runtime (go_*) and process (process_*)
	// collectors, which are included by default.
	NoRuntime bool
}

// DefaultBuckets spans a trivial cell (a few milliseconds) to a call that runs into
// the default one-hour cap.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// Metrics holds kernelbox's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	executions    *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	kernelStarts  prometheus.Counter
	kernelDeaths  prometheus.Counter
	artifacts     prometheus.Counter
	artifactBytes prometheus.Counter
	decisions     *prometheus.CounterVec
	egressConns   *prometheus.CounterVec
	egressBytes   *prometheus.CounterVec
	sessions      *sessionCollector
	templates     *templateCollector
	snapshots     snapshotMetrics // snapshot.go
}

var (
	_ executor.Observer        = (*Metrics)(nil)
	_ executor.NetworkObserver = (*Metrics)(nil)
)

// The statuses a call can end with, pre-set to zero so that rates exist before the
// first call of each kind.
var statuses = []api.Status{
	api.StatusOK, api.StatusError, api.StatusTimeout,
	api.StatusKernelDied, api.StatusDenied,
}

// New returns Metrics registered in a new private registry:
//
//	kernelbox_executions_total{status}                  calls by final status
//	kernelbox_execution_duration_seconds{status}        call latency, queueing included
//	kernelbox_sessions{state}                           live sessions by state, at scrape time
//	kernelbox_template_sessions{template}               live sessions per template, at scrape time
//	kernelbox_template_warm_ready{template}             warm kernels ready per template, at scrape time
//	kernelbox_kernel_starts_total                       kernels started (sessions and warm pool)
//	kernelbox_kernel_deaths_total                       kernels found dead during a call
//	kernelbox_artifacts_total                           artifacts collected
//	kernelbox_artifact_bytes_total                      bytes of those artifacts
//	kernelbox_permission_decisions_total{capability,effect}  permission decisions
//	kernelbox_egress_connections_total{decision}        egress proxy connections (allow, deny)
//	kernelbox_egress_bytes_total{direction}             bytes through the egress proxy (up, down)
//	kernelbox_hibernated_sessions, kernelbox_snapshots_total, kernelbox_snapshot_bytes_total,
//	kernelbox_snapshot_duration_seconds, kernelbox_restore_duration_seconds  (snapshot.go)
//
// plus the go_* and process_* collectors unless Options.NoRuntime is set.
func New(opts Options) *Metrics {
	ns := opts.Namespace
	if ns == "" {
		ns = "kernelbox"
	}
	buckets := opts.Buckets
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "executions_total",
			Help: "Calls that ran or were denied, by final status (ok, error, timeout, kernel_died, denied).",
		}, []string{"status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "execution_duration_seconds",
			Help:    "Duration of calls from arrival to result, including time queued and kernel start, by final status.",
			Buckets: buckets,
		}, []string{"status"}),
		kernelStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "kernel_starts_total",
			Help: "Kernels started, for sessions and for the warm pool.",
		}),
		kernelDeaths: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "kernel_deaths_total",
			Help: "Kernels that died (or whose server or container went away) during a call.",
		}),
		artifacts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "artifacts_total",
			Help: "Artifacts collected: files new or changed in outputs/ and saved rich outputs.",
		}),
		artifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "artifact_bytes_total",
			Help: "Bytes of the artifacts collected.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "permission_decisions_total",
			Help: "Permission decisions by capability and effect (allow or deny; asks are counted as settled).",
		}, []string{"capability", "effect"}),
		egressConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "egress_connections_total",
			Help: "Connections of sessions with a network allowlist through kernelbox's egress proxy, by decision (allow, deny), counted when a call reports them.",
		}, []string{"decision"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "egress_bytes_total",
			Help: "Bytes carried by the egress proxy, by direction (up: kernel to server, down: server to kernel).",
		}, []string{"direction"}),
		sessions:  newSessionCollector(ns),
		templates: newTemplateCollector(ns),
	}
	for _, s := range statuses {
		m.executions.WithLabelValues(string(s))
	}
	m.egressConns.WithLabelValues("allow")
	m.egressConns.WithLabelValues("deny")
	m.egressBytes.WithLabelValues("up")
	m.egressBytes.WithLabelValues("down")
	m.reg.MustRegister(m.executions, m.latency, m.kernelStarts, m.kernelDeaths,
		m.artifacts, m.artifactBytes, m.decisions, m.egressConns, m.egressBytes, m.sessions, m.templates)
	m.snapshots = newSnapshotMetrics(ns)
	m.snapshots.register(m.reg)
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry returns the registry the metrics are in, to gather them or to register
// more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// CallFinished implements executor.Observer.
func (m *Metrics) CallFinished(status api.Status, d time.Duration) {
	m.executions.WithLabelValues(string(status)).Inc()
	m.latency.WithLabelValues(string(status)).Observe(d.Seconds())
}

// KernelStarted implements executor.Observer.
func (m *Metrics) KernelStarted() { m.kernelStarts.Inc() }

// KernelDied implements executor.Observer.
func (m *Metrics) KernelDied() { m.kernelDeaths.Inc() }

// ArtifactsCollected implements executor.Observer.
func (m *Metrics) ArtifactsCollected(count int, bytes int64) {
	m.artifacts.Add(float64(count))
	m.artifactBytes.Add(float64(bytes))
}

// ObserveDecision counts one permission decision; it fits permissions.Engine's
// OnDecision field.
func (m *Metrics) ObserveDecision(d permissions.Decision) {
	m.decisions.WithLabelValues(d.Capability.Name, d.Effect.String()).Inc()
}

// WatchSessions sets the function that lists the live sessions (typically an
// Executor's Sessions method), called at each scrape. Until it is set, every state
// reports zero. It may be called at any time, for example after the executor that
// uses m as its Observer has been built.
func (m *Metrics) WatchSessions(list func() []api.SessionInfo) {
	m.sessions.list.Store(&list)
}

// WatchTemplates sets the function that lists the templates with their sessions and
// warm kernels (typically an Executor's TemplateInfos), called at each scrape.
func (m *Metrics) WatchTemplates(list func() []api.TemplateInfo) {
	m.templates.list.Store(&list)
}

// templateCollector reports, per template, its live sessions and ready warm
// kernels, read at scrape time.
type templateCollector struct {
	sessions, warm *prometheus.Desc
	list           atomic.Pointer[func() []api.TemplateInfo]
}

func newTemplateCollector(ns string) *templateCollector {
	return &templateCollector{
		sessions: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "template_sessions"),
			"Live sessions per template, read at scrape time.", []string{"template"}, nil),
		warm: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "template_warm_ready"),
			"Warm kernels ready per template (past its preload), read at scrape time.", []string{"template"}, nil),
	}
}

func (c *templateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.warm
}

func (c *templateCollector) Collect(ch chan<- prometheus.Metric) {
	list := c.list.Load()
	if list == nil {
		return
	}
	for _, t := range (*list)() {
		ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(t.Sessions), t.Name)
		ch <- prometheus.MustNewConstMetric(c.warm, prometheus.GaugeValue, float64(t.WarmReady), t.Name)
	}
}

// sessionStates are the states an executor session can be in, reported even when
// zero so that a dashboard shows a flat line instead of no data.
var sessionStates = []api.SessionState{api.StateNew, api.StateStarting, api.StateIdle, api.StateBusy, api.StateDead, api.StateHibernated, api.StateRestoring}

// sessionCollector reports the sessions by state, read at scrape time.
type sessionCollector struct {
	desc *prometheus.Desc
	list atomic.Pointer[func() []api.SessionInfo]
}

func newSessionCollector(ns string) *sessionCollector {
	return &sessionCollector{desc: prometheus.NewDesc(
		prometheus.BuildFQName(ns, "", "sessions"),
		"Sessions by state (new, starting, idle, busy, dead, hibernated, restoring), read at scrape time.",
		[]string{"state"}, nil,
	)}
}

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	counts := make(map[api.SessionState]int, len(sessionStates))
	for _, s := range sessionStates {
		counts[s] = 0
	}
	if list := c.list.Load(); list != nil {
		for _, s := range (*list)() {
			counts[s.State]++
		}
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(state))
	}
}

// NetworkReported counts a session's egress connections and bytes.
func (m *Metrics) NetworkReported(r executor.NetworkReport) {
	m.egressConns.WithLabelValues("allow").Add(float64(r.Allowed))
	m.egressConns.WithLabelValues("deny").Add(float64(r.Refused))
	m.egressBytes.WithLabelValues("up").Add(float64(r.Up))
	m.egressBytes.WithLabelValues("down").Add(float64(r.Down))
}
