package executor

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/egress"
)

// Template shapes the sessions created with it: which kernel they run, where, with
// what limits, and what runs in every fresh kernel before it is handed out. Every
// zero field means the server's own setting (Options, and the backend's options).
// Templates are loaded from a file by package templates; the executor checks the
// fields its backend cannot apply (see SpecApplier) in New.
type Template struct {
	// Name is how callers choose the template; see api.ValidTemplateName.
	Name string
	// Description tells a person or a model what the template is for.
	Description string

	// Kernel is the kernelspec to start ("python3", "ir", ...). "python3" and ""
	// mean the backend's Python kernel (for local and docker, kernelbox's own
	// launcher of it).
	Kernel string
	// KernelNames are Jupyter kernel names that choose this template
	// (api.TemplateForKernel); the templates loader checks them.
	KernelNames []string
	// Image is the container image (docker).
	Image string
	// Runtime is the OCI runtime of the session's container (docker), for
	// example "runsc" for gVisor. "" means the backend's own.
	Runtime string
	// Memory is the memory limit in bytes (docker), CPUs the CPU limit in CPUs'
	// worth of time (docker), Pids the process and thread limit (docker).
	Memory int64
	CPUs   float64
	Pids   int64

	// Env is added to the kernel's environment. Not for secrets: templates are
	// listed to every client with GET /v1/templates.
	Env map[string]string

	// Preload is code in the kernel's language run once in every fresh kernel of
	// the template (started, restarted or replaced) before a call reaches it. An
	// error in it fails the kernel's start with its traceback.
	Preload string
	// PreloadTimeout bounds the preload in each fresh kernel: one that runs
	// longer fails the kernel's start with a PreloadTimeoutError. Zero means
	// Options.PreloadTimeout; it must be shorter than Options.StartTimeout.
	PreloadTimeout time.Duration

	// Warm is how many kernels of the template are kept started ahead of need,
	// past their preload.
	Warm int
	// IdleTimeout closes the template's sessions idle for that long; negative
	// never closes them.
	IdleTimeout time.Duration
	// HibernateAfter hibernates the template's sessions idle for that long
	// (when they can; others are closed at IdleTimeout as before). Zero means
	// Options.HibernateAfter; negative never hibernates them when idle.
	HibernateAfter time.Duration
	// Checkpoint is CheckpointAfterCall to save the namespace after each call
	// that left it whole (in the kernel, after the call's result is delivered and
	// before the session's next job; bounded by Options.CheckpointTimeout and the
	// snapshot limit, and skipped with a note on the next result when it cannot
	// finish), so that a kernel that dies or is replaced (OOM, a crash, a restart
	// after an ignored interrupt) comes back with the namespace of the call the
	// checkpoint was taken after: the next result says StateRestored instead of
	// a bare StateLost. Python sessions on a backend whose kernels write into the
	// session directory (local, docker); others are told that they are not
	// checkpointed. "" means Options.Checkpoint; "off" none.
	Checkpoint string
	// MaxLifetime is the hard limit on a session's container (docker).
	MaxLifetime time.Duration

	// Data is exposed read-only in the template's sessions at data/<Name>, in
	// addition to Options.Data.
	Data []DataMount

	// Network is what the template's sessions may reach through kernelbox's
	// egress proxy; nil is no network at all (the default). Only a backend that
	// confines its kernels and carries their egress through the proxy may apply
	// it (SpecFields.Network): local cannot confine anything, remote has no say
	// over its gateway's network.
	Network *egress.Rules
}

// SpecFields says which of a template's fields a backend applies itself (see
// SpecApplier). The executor applies Preload and, for Python and R kernels, Env
// by code; Warm, IdleTimeout and Data it applies for every backend.
type SpecFields struct {
	Kernel, Image, Memory, CPUs, Pids, MaxLifetime, Env, Network, Runtime bool
	// Secrets: the backend's proxy adds a template's secrets (Network.Secrets)
	// and its kernels trust the interception CA.
	Secrets bool
}

// SpecApplier is implemented by backends that apply some of SessionSpec.Template's
// fields themselves. A template that sets a field its backend does not apply is
// refused by New, with the template's and the field's names: a session must never
// silently get less (a memory limit, an image) than its template says.
type SpecApplier interface {
	Applies() SpecFields
}

// SpecExplainer is implemented by backends that can say why they do not apply a
// template field, so that the error refusing a template tells its author what
// to do instead. It is asked only for a field the backend does not apply (see
// SpecApplier), by the field's name in a template file ("network", "memory", …).
type SpecExplainer interface {
	// WhyNot returns why the backend cannot apply field, or "" for no reason
	// beyond the backend's not applying it.
	WhyNot(field string) string
}

// checkTemplates checks the templates against the backend and fills in the default
// template from o. It returns the templates by name.
func checkTemplates(o *Options) (map[string]*Template, error) {
	byName := map[string]*Template{}
	for i := range o.Templates {
		t := o.Templates[i]
		if !api.ValidTemplateName(t.Name) {
			return nil, fmt.Errorf("template %q: invalid name: use %s", clip(t.Name, 80), api.TemplateNameRule)
		}
		if byName[t.Name] != nil {
			return nil, fmt.Errorf("template %q: defined twice", t.Name)
		}
		t.Env = cloneEnv(t.Env)
		t.Data = slices.Clone(t.Data)
		byName[t.Name] = &t
	}
	def := byName[api.DefaultTemplateName]
	if def == nil {
		def = &Template{Name: api.DefaultTemplateName, Description: "the server's own settings"}
		byName[api.DefaultTemplateName] = def
	}
	// The flags' values are the default template's unless the file sets them.
	if def.Warm == 0 {
		def.Warm = o.Warm
	}
	if def.IdleTimeout == 0 {
		def.IdleTimeout = o.IdleTimeout
	}
	if def.HibernateAfter == 0 {
		def.HibernateAfter = o.HibernateAfter
	}
	if def.Kernel == "" {
		def.Kernel = o.Kernel
	}
	if o.PreloadTimeout < 0 || o.PreloadTimeout >= o.StartTimeout {
		return nil, fmt.Errorf("executor: Options.PreloadTimeout is %s; it must be positive and shorter than StartTimeout (%s)", o.PreloadTimeout, o.StartTimeout)
	}
	for _, t := range byName {
		if err := checkTemplate(o, t); err != nil {
			return nil, err
		}
	}
	return byName, nil
}

// checkTemplate checks one template against the options and fills its defaults:
// fields its backend cannot apply are refused, and its data mounts' names must
// not collide with the server's.
func checkTemplate(o *Options, t *Template) error {
	if t.Warm < 0 {
		return fmt.Errorf("template %q: warm must not be negative", t.Name)
	}
	switch {
	case t.PreloadTimeout < 0:
		return fmt.Errorf("template %q: preload_timeout must not be negative", t.Name)
	case t.PreloadTimeout == 0:
		t.PreloadTimeout = o.PreloadTimeout
	case t.PreloadTimeout >= o.StartTimeout:
		return fmt.Errorf("template %q: preload_timeout %s is not shorter than the start timeout (%s), which bounds the whole start, preload included", t.Name, t.PreloadTimeout, o.StartTimeout)
	}
	if t.IdleTimeout == 0 {
		t.IdleTimeout = o.IdleTimeout
	}
	if t.HibernateAfter == 0 {
		t.HibernateAfter = o.HibernateAfter
	}
	if t.Checkpoint == "" {
		t.Checkpoint = o.Checkpoint
	}
	if err := CheckCheckpoint(t.Checkpoint); err != nil {
		return fmt.Errorf("template %q: %w", t.Name, err)
	}
	if err := checkApplies(o, t); err != nil {
		return err
	}
	if err := CheckKernelName(t.Kernel); err != nil {
		return fmt.Errorf("template %q: field kernel: %w", t.Name, err)
	}
	if err := checkEnv(t.Name, t.Env); err != nil {
		return err
	}
	names := map[string]bool{}
	for _, d := range o.Data {
		names[d.Name] = true
	}
	for _, d := range t.Data {
		if names[d.Name] {
			return fmt.Errorf("template %q: data mount %q: the name is used twice (the server's --data mounts are in every template)", t.Name, d.Name)
		}
		names[d.Name] = true
	}
	return nil
}

// checkApplies refuses a template field its backend cannot apply (SpecApplier).
func checkApplies(o *Options, t *Template) error {
	if o.Backend == nil {
		return nil
	}
	var applies SpecFields
	if sa, ok := o.Backend.(SpecApplier); ok {
		applies = sa.Applies()
	}
	refuse := func(field string, set, applied bool) error {
		if set && !applied {
			return refusal(o.Backend, t.Name, field, "")
		}
		return nil
	}
	return errors.Join(
		refuse("kernel", t.Kernel != "" && t.Kernel != "python3", applies.Kernel),
		refuse("image", t.Image != "", applies.Image),
		refuse("runtime", t.Runtime != "", applies.Runtime),
		refuse("memory", t.Memory != 0, applies.Memory),
		refuse("cpus", t.CPUs != 0, applies.CPUs),
		refuse("pids", t.Pids != 0, applies.Pids),
		refuse("max_lifetime", t.MaxLifetime != 0, applies.MaxLifetime),
		refuseNetwork(o, t, applies.Network),
		refuseSecrets(o, t, applies),
	)
}

// refuseSecrets refuses secrets on a backend whose proxy cannot add them.
func refuseSecrets(o *Options, t *Template, applies SpecFields) error {
	if t.Network.Secrets() == nil || applies.Secrets {
		return nil
	}
	why := "its egress proxy does not add secrets"
	if !applies.Network {
		why = "it has no egress proxy, and a secret must never be handed to the kernel itself"
	}
	return refusal(o.Backend, t.Name, "secrets", why) // local says why its kernels must not hold one
}

// refuseNetwork refuses a network allowlist on a backend that cannot enforce one,
// saying why: a session must not believe it is confined when it is not.
func refuseNetwork(o *Options, t *Template, applied bool) error {
	if t.Network == nil || applied {
		return nil
	}
	return refusal(o.Backend, t.Name, "network", "it does not carry its kernels' egress through kernelbox's proxy")
}

// refusal is the error refusing template tmpl's field on backend b: with the
// backend's reason when it gives one (SpecExplainer), else with why ("" for none).
func refusal(b Backend, tmpl, field, why string) error {
	if se, ok := b.(SpecExplainer); ok {
		if w := se.WhyNot(field); w != "" {
			why = w
		}
	}
	if why == "" {
		return fmt.Errorf("template %q: field %s: the %s backend cannot apply it", tmpl, field, b.Name())
	}
	return fmt.Errorf("template %q: field %s: the %s backend cannot apply it: %s", tmpl, field, b.Name(), why)
}

// envName is what an environment variable's name must look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedEnv lists the variables kernelbox sets itself (names, and prefixes ending
// in "_" or "*"): a template must not change how the server, the kernel launcher or
// the loader work.
var reservedEnv = []string{
	"HOME", "PATH", "SHELL", "USER", "PWD",
	"JUPYTER_*", "JPY_*", "KERNELBOX_*", "IPYTHONDIR", "IPYKERNEL_*",
	"MPLCONFIGDIR", "MPLBACKEND", "PYTHONUNBUFFERED", "PYTHONSTARTUP", "PYTHONHOME",
	"PYTHONPATH", "PYTHONSAFEPATH", "PYDEVD_*", "XDG_*", "LD_*",
	"R_HOME", "R_LIBS*", "R_PROFILE*", "R_ENVIRON*",
}

// ReservedEnv reports whether name is a variable kernelbox sets or relies on, which a
// template may not set.
func ReservedEnv(name string) bool {
	for _, r := range reservedEnv {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == r {
			return true
		}
	}
	return false
}

// checkEnv checks a template's environment variables.
func checkEnv(tmpl string, env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case !envName.MatchString(k):
			return fmt.Errorf("template %q: env %q: a name is a letter or '_' then letters, digits or '_' (at most 128)", tmpl, clip(k, 80))
		case ReservedEnv(k):
			return fmt.Errorf("template %q: env %q: kernelbox sets this variable itself", tmpl, k)
		case strings.IndexByte(env[k], 0) >= 0:
			return fmt.Errorf("template %q: env %q: the value contains a NUL byte", tmpl, k)
		case len(env[k]) > 32<<10:
			return fmt.Errorf("template %q: env %q: the value is %d bytes; the limit is 32 KiB", tmpl, k, len(env[k]))
		}
	}
	return nil
}

func cloneEnv(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Templates returns the executor's templates, sorted by name, the default first.
func (e *Executor) Templates() []Template {
	out := make([]Template, 0, len(e.templates))
	for _, t := range e.templates {
		c := *t
		c.Env = cloneEnv(t.Env)
		c.Data = slices.Clone(t.Data)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Name == api.DefaultTemplateName) != (out[j].Name == api.DefaultTemplateName) {
			return out[i].Name == api.DefaultTemplateName
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// template returns the template a request names ("" is the default one).
func (e *Executor) template(name string) (*Template, error) {
	if name == "" {
		name = api.DefaultTemplateName
	}
	t := e.templates[name]
	if t == nil {
		names := make([]string, 0, len(e.templates))
		for n := range e.templates {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, invalidf("unknown template %q: this server has %s", clip(name, 80), strings.Join(names, ", "))
	}
	return t, nil
}

// dataOf returns the data mounts of a template's sessions.
func (e *Executor) dataOf(t *Template) []DataMount {
	if len(t.Data) == 0 {
		return e.opts.Data
	}
	return append(slices.Clone(e.opts.Data), t.Data...)
}

// Limits are a server's own per-session settings: what a template that sets none of
// its own gets. Zero fields are unknown or not applicable (no container).
type Limits struct {
	Kernel      string
	Image       string
	Memory      int64
	CPUs        float64
	Pids        int64
	MaxLifetime time.Duration
}

// TemplateInfos lists the templates with their effective settings (Options.Limits
// where a template sets none), their warm kernels ready and their live sessions,
// in the order of Templates.
func (e *Executor) TemplateInfos() []api.TemplateInfo {
	live := map[string]int{}
	for _, s := range e.Sessions() {
		live[s.Template]++
	}
	l := e.opts.Limits
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	ts := e.Templates()
	out := make([]api.TemplateInfo, 0, len(ts))
	for _, t := range ts {
		kernel := t.Kernel
		if kernel == "" {
			kernel = or(l.Kernel, "python3")
		}
		info := api.TemplateInfo{
			Name: t.Name, Description: t.Description, Kernel: kernel, KernelNames: t.KernelNames,
			Image: or(t.Image, l.Image), Runtime: t.Runtime, MemoryBytes: t.Memory, CPUs: t.CPUs, Pids: t.Pids,
			Preload: strings.TrimSpace(t.Preload) != "", PreloadBytes: len(t.Preload),
			Warm: t.Warm, WarmReady: e.WarmReadyOf(t.Name), Sessions: live[t.Name],
			MaxLifetimeSeconds: t.MaxLifetime.Seconds(),
		}
		if info.MemoryBytes == 0 {
			info.MemoryBytes = l.Memory
		}
		if info.CPUs == 0 {
			info.CPUs = l.CPUs
		}
		if info.Pids == 0 {
			info.Pids = l.Pids
		}
		if t.MaxLifetime == 0 {
			info.MaxLifetimeSeconds = l.MaxLifetime.Seconds()
		}
		if info.Preload {
			info.PreloadTimeoutSeconds = t.PreloadTimeout.Seconds()
		}
		if t.IdleTimeout > 0 {
			info.IdleTimeoutSeconds = t.IdleTimeout.Seconds()
		}
		if t.HibernateAfter > 0 {
			info.HibernateAfterSeconds = t.HibernateAfter.Seconds()
		}
		if t.Checkpoint == CheckpointAfterCall {
			info.Checkpoint = t.Checkpoint
		}
		for k := range t.Env {
			info.Env = append(info.Env, k)
		}
		sort.Strings(info.Env)
		for _, d := range e.dataOf(&t) {
			info.Data = append(info.Data, d.Name)
		}
		info.Network = networkInfo(t.Network)
		info.Secrets = secretInfo(t.Network.Secrets())
		out = append(out, info)
	}
	return out
}

// networkInfo shows a template's network setting to clients.
func networkInfo(r *egress.Rules) *api.NetworkInfo {
	if r == nil {
		return &api.NetworkInfo{Mode: api.NetworkNone}
	}
	p := r.Policy()
	return &api.NetworkInfo{Mode: api.NetworkAllowlist, Allow: slices.Clone(p.Allow), CIDRs: slices.Clone(p.CIDRs), MaxBytes: p.MaxBytes, MaxConns: p.MaxConns}
}

// secretInfo shows a template's secret rules to clients: never a value, nor
// where it is read from.
func secretInfo(s *egress.Secrets) []api.SecretInfo {
	var out []api.SecretInfo
	for _, r := range s.Rules() {
		out = append(out, api.SecretInfo{
			Name: r.Name, Kind: r.Kind, Hosts: r.Hosts, Paths: r.Paths, Header: r.Header, Env: r.Env,
			Region: r.Region, Service: r.Service, AllowPlainHTTP: r.AllowPlainHTTP,
		})
	}
	return out
}
