// Package templates reads the templates file given to `kernelbox serve` and
// `kernelbox mcp` (--templates FILE): named session shapes — which kernel, image and
// limits a session gets, its environment, a preload cell, its warm pool — that
// callers choose when they create a session. Start reading at [Load]; the executor's
// [executor.Template] is what it produces.
//
// The file is JSON, read with the standard library's encoding/json with unknown
// fields refused (DisallowUnknownFields), like the permission policy file
// (--policy): one format and one parser for both of kernelbox's config files, no
// dependency, and a typo in a field name is an error instead of a setting silently
// not applied. YAML or TOML would read more easily for multi-line preload cells, so
// "preload" also takes a list of lines.
//
//	{"templates": [
//	  {"name": "analyst", "description": "pandas and matplotlib, imported",
//	   "memory": "1g", "cpus": 1, "warm": 1,
//	   "preload": ["import pandas as pd", "import matplotlib.pyplot as plt"]}
//	]}
//
// "kernel_names" lists Jupyter kernel names that choose the template (a notebook's
// kernelspec name, a gateway start request's name, as api.TemplateForKernel
// resolves them); "python3", "python" and "ir" choose the default template of their
// language without being listed. A name is claimed by one template at most and is
// no template's own name.
//
// Every field but "name" is optional; what a template leaves out is the server's
// own setting (its flags), which also make up the template named "default" unless
// the file defines one. "preload_timeout" (a duration such as "20s") bounds the
// preload in each fresh kernel; it defaults to the executor's
// [executor.DefaultPreloadTimeout] (60 s) and must be at least 1 s and shorter than
// the server's start timeout (2 minutes), which bounds the whole start. A template never gets more than the server's flags give a
// session: one asking more memory, CPUs, pids, lifetime or idle time than [Caps] is
// refused when the file is loaded, with the template, the field, what it asked and
// the cap. "network" is "none" (the default: no network at all) or an allowlist
// for kernelbox's egress proxy, an [egress.Policy] such as {"allow":
// ["files.example", "*.data.example:443"]}, checked here and refused by the
// executor on a backend that cannot enforce it. "secrets" lists credentials
// that kernelbox's egress proxy adds to requests to named hosts of that
// allowlist ([egress.SecretRule]; values read from serve's environment or a
// file here, never from this file; see secrets.go). Environment variables are listed to every client (GET /v1/templates
// shows their names): they are not for secrets.
package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/capacity"
)

// Limits on a templates file.
const (
	// MaxFileBytes is the largest templates file read.
	MaxFileBytes = 1 << 20
	// MaxTemplates is the most templates in one file.
	MaxTemplates = 64
	// MaxKernelNames is the most kernel_names of one template.
	MaxKernelNames = 16
	// MaxPreloadBytes is the largest preload cell.
	MaxPreloadBytes = 256 << 10
	// MaxDescriptionBytes is the longest description.
	MaxDescriptionBytes = 2 << 10
	// MaxEnv is the most environment variables of one template.
	MaxEnv = 64
	// MaxWarm is the largest warm pool of one template.
	MaxWarm = 64
)

// Caps are the server's per-session settings, which no template may exceed. A zero
// field is no cap (the setting has no limit on this server, or its backend has no
// such limit: the executor then refuses a template that sets it at all).
type Caps struct {
	// Memory in bytes (--memory), CPUs and Pids: the docker backend's limits.
	Memory int64
	CPUs   float64
	Pids   int64
	// MaxLifetime is the docker containers' hard limit.
	MaxLifetime time.Duration
	// IdleTimeout is --idle-timeout: a template may close idle sessions sooner,
	// not later. Zero when the server never closes them.
	IdleTimeout time.Duration
	// StartTimeout is the executor's start timeout (executor.Options.StartTimeout),
	// which a template's preload_timeout must be shorter than. Zero means
	// executor.DefaultStartTimeout.
	StartTimeout time.Duration
}

// LimitCaps returns the caps a server's limits (what one session gets from its
// flags, executor.Options.Limits) put on every template: no template may ask for
// more memory, CPUs, processes or lifetime. The timeouts are left zero.
func LimitCaps(l executor.Limits) Caps {
	return Caps{Memory: l.Memory, CPUs: l.CPUs, Pids: l.Pids, MaxLifetime: l.MaxLifetime}
}

// MinPreloadTimeout is the shortest preload_timeout a template may set.
const MinPreloadTimeout = time.Second

// file is the JSON document.
type file struct {
	Templates []json.RawMessage `json:"templates"`
}

// entry is one template as written.
type entry struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Kernel      string            `json:"kernel"`
	KernelNames []string          `json:"kernel_names"`
	Image       string            `json:"image"`
	Runtime     string            `json:"runtime"`
	Memory      string            `json:"memory"`
	CPUs        float64           `json:"cpus"`
	Pids        int64             `json:"pids"`
	Env         map[string]string `json:"env"`
	Preload     lines             `json:"preload"`
	PreloadWait string            `json:"preload_timeout"`
	Warm        int               `json:"warm"`
	IdleTimeout string            `json:"idle_timeout"`
	Hibernate   string            `json:"hibernate_after"`
	Checkpoint  string            `json:"checkpoint"`
	MaxLifetime string            `json:"max_lifetime"`
	Data        map[string]string `json:"data"`
	Network     json.RawMessage   `json:"network"`
	Secrets     json.RawMessage   `json:"secrets"`
}

// lines is a string, or a list of lines joined with newlines.
type lines string

func (l *lines) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = lines(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("preload: want a string or a list of strings (lines)")
	}
	*l = lines(strings.Join(list, "\n"))
	return nil
}

// Load reads the templates file at path and checks it against caps. Relative data
// directories are taken from the file's directory.
func Load(path string, caps Caps) ([]executor.Template, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	defer f.Close()
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	ts, err := Parse(f, dir, caps)
	if err != nil {
		return nil, fmt.Errorf("templates %s: %w", path, err)
	}
	return ts, nil
}

// Parse reads a templates document from r; baseDir resolves relative data
// directories.
func Parse(r io.Reader, baseDir string, caps Caps) ([]executor.Template, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("the file is over %d bytes, the limit", MaxFileBytes)
	}
	var doc file
	if err := strict(b, &doc); err != nil {
		return nil, err
	}
	if doc.Templates == nil {
		return nil, errors.New(`no "templates" list`)
	}
	if len(doc.Templates) > MaxTemplates {
		return nil, fmt.Errorf("%d templates; the limit is %d", len(doc.Templates), MaxTemplates)
	}
	seen := map[string]bool{}
	out := make([]executor.Template, 0, len(doc.Templates))
	for i, raw := range doc.Templates {
		var e entry
		if err := strict(raw, &e); err != nil {
			// Name the template even when a field is wrong: read its name alone.
			var n struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &n)
			return nil, fmt.Errorf("template #%d %q: %w", i+1, clip(n.Name), err)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("template #%d %q: the name is used twice", i+1, clip(e.Name))
		}
		seen[e.Name] = true
		t, err := e.template(baseDir, caps)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", clip(e.Name), err)
		}
		out = append(out, t)
	}
	if err := checkKernelNames(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkKernelNames refuses a kernel_names entry that is not a kernelspec name, that
// is a template's own name, or that two templates claim: each name chooses one
// template (api.TemplateForKernel).
func checkKernelNames(ts []executor.Template) error {
	names := map[string]bool{}
	for _, t := range ts {
		names[t.Name] = true
	}
	owner := map[string]string{}
	for _, t := range ts {
		for _, n := range t.KernelNames {
			switch err := executor.CheckKernelName(n); {
			case n == "":
				return fmt.Errorf("template %q: kernel_names: an empty name", clip(t.Name))
			case err != nil:
				return fmt.Errorf("template %q: kernel_names: %w", clip(t.Name), err)
			case names[n]:
				return fmt.Errorf("template %q: kernel_names: %q is a template's name, which chooses that template already", clip(t.Name), n)
			case owner[n] != "":
				return fmt.Errorf("template %q: kernel_names: %q is listed by template %q too; a kernel name chooses one template", clip(t.Name), n, owner[n])
			}
			owner[n] = t.Name
		}
	}
	return nil
}

// strict decodes one JSON value with unknown fields refused and nothing after it.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if dec.More() {
		return errors.New("json: data after the document")
	}
	return nil
}

// template checks an entry and converts it.
func (e entry) template(baseDir string, caps Caps) (executor.Template, error) {
	t := executor.Template{
		Name: e.Name, Description: e.Description, Kernel: e.Kernel, KernelNames: e.KernelNames, Image: e.Image, Runtime: e.Runtime,
		CPUs: e.CPUs, Pids: e.Pids, Env: e.Env, Preload: string(e.Preload), Warm: e.Warm,
	}
	switch {
	case e.Name == "":
		return t, errors.New("name: empty; every template needs a name")
	case !api.ValidTemplateName(e.Name):
		return t, fmt.Errorf("name: use %s", api.TemplateNameRule)
	case len(e.Description) > MaxDescriptionBytes:
		return t, fmt.Errorf("description: %d bytes; the limit is %d", len(e.Description), MaxDescriptionBytes)
	case e.Kernel != "" && !api.ValidTemplateName(e.Kernel):
		return t, fmt.Errorf("kernel %q: not a kernelspec name (%s)", clip(e.Kernel), api.TemplateNameRule)
	case strings.ContainsAny(e.Image, " \t\n\x00"):
		return t, fmt.Errorf("image %q: not an image reference", clip(e.Image))
	case e.Runtime != "" && !validRuntime(e.Runtime):
		return t, fmt.Errorf("runtime %q: not a runtime name (letters, digits, '.', '_', '-'; at most 64)", clip(e.Runtime))
	case len(e.Preload) > MaxPreloadBytes:
		return t, fmt.Errorf("preload: %d bytes; the limit is %d", len(e.Preload), MaxPreloadBytes)
	case strings.IndexByte(string(e.Preload), 0) >= 0:
		return t, errors.New("preload: contains a NUL byte")
	case e.Warm < 0 || e.Warm > MaxWarm:
		return t, fmt.Errorf("warm: %d; want 0 to %d", e.Warm, MaxWarm)
	case len(e.Env) > MaxEnv:
		return t, fmt.Errorf("env: %d variables; the limit is %d", len(e.Env), MaxEnv)
	case len(e.KernelNames) > MaxKernelNames:
		return t, fmt.Errorf("kernel_names: %d names; the limit is %d", len(e.KernelNames), MaxKernelNames)
	case e.CPUs < 0:
		return t, errors.New("cpus: must not be negative")
	case e.Pids < 0:
		return t, errors.New("pids: must not be negative")
	}
	for k := range e.Env {
		if executor.ReservedEnv(k) {
			return t, fmt.Errorf("env %q: kernelbox sets this variable itself", k)
		}
	}
	if err := e.limits(&t, caps); err != nil {
		return t, err
	}
	var err error
	if t.IdleTimeout, err = duration("idle_timeout", e.IdleTimeout, caps.IdleTimeout, "--idle-timeout"); err != nil {
		return t, err
	}
	if t.HibernateAfter, err = duration("hibernate_after", e.Hibernate, 0, ""); err != nil {
		return t, err
	}
	if err := executor.CheckCheckpoint(e.Checkpoint); err != nil {
		return t, err
	}
	t.Checkpoint = e.Checkpoint
	if t.MaxLifetime, err = duration("max_lifetime", e.MaxLifetime, caps.MaxLifetime, "the containers' max lifetime"); err != nil {
		return t, err
	}
	if t.PreloadTimeout, err = preloadTimeout(e.PreloadWait, caps.StartTimeout); err != nil {
		return t, err
	}
	if t.Network, err = network(e.Network); err != nil {
		return t, err
	}
	if t.Network, err = secrets(e.Secrets, t.Network, e.Env); err != nil {
		return t, err
	}
	if t.Data, err = dataMounts(e.Data, baseDir); err != nil {
		return t, err
	}
	return t, nil
}

// limits checks the entry's memory, CPUs and pids against the server's caps and
// sets t's memory.
func (e entry) limits(t *executor.Template, caps Caps) error {
	if e.Memory != "" {
		n, err := capacity.ParseBytes(e.Memory)
		if err != nil || n <= 0 {
			return fmt.Errorf("memory %q: want a size such as 512m or 2g", clip(e.Memory))
		}
		if caps.Memory > 0 && n > caps.Memory {
			return fmt.Errorf("memory: asks %s, over the server's cap of %s (--memory)", capacity.FormatBytes(n), capacity.FormatBytes(caps.Memory))
		}
		t.Memory = n
	}
	if caps.CPUs > 0 && e.CPUs > caps.CPUs {
		return fmt.Errorf("cpus: asks %g, over the server's cap of %g", e.CPUs, caps.CPUs)
	}
	if caps.Pids > 0 && e.Pids > caps.Pids {
		return fmt.Errorf("pids: asks %d, over the server's cap of %d", e.Pids, caps.Pids)
	}
	return nil
}

// dataMounts turns the entry's data map into mounts, in name order; a relative
// directory is relative to baseDir (the templates file's).
func dataMounts(data map[string]string, baseDir string) ([]executor.DataMount, error) {
	var out []executor.DataMount
	names := make([]string, 0, len(data))
	for n := range data {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := data[n]
		if d == "" {
			return nil, fmt.Errorf("data %q: empty directory", clip(n))
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(baseDir, d)
		}
		out = append(out, executor.DataMount{Name: n, HostDir: filepath.Clean(d)})
	}
	return out, nil
}

// duration parses a duration field and holds it to a cap (0: none).
func duration(field, s string, capd time.Duration, capName string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive duration such as 90s, 10m or 2h", field, clip(s))
	}
	if capd > 0 && d > capd {
		return 0, fmt.Errorf("%s: asks %s, over the server's cap of %s (%s)", field, d, capd, capName)
	}
	return d, nil
}

// preloadTimeout parses preload_timeout: at least MinPreloadTimeout and shorter
// than the start timeout (0: executor.DefaultStartTimeout). "" is 0, the server's.
func preloadTimeout(s string, start time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if start <= 0 {
		start = executor.DefaultStartTimeout
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d <= 0:
		return 0, fmt.Errorf("preload_timeout %q: want a positive duration such as 20s or 90s", clip(s))
	case d < MinPreloadTimeout:
		return 0, fmt.Errorf("preload_timeout: %s; want at least %s", d, MinPreloadTimeout)
	case d >= start:
		return 0, fmt.Errorf("preload_timeout: asks %s; it must be shorter than the server's start timeout of %s, which bounds the whole start", d, start)
	}
	return d, nil
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}

// network reads the "network" field: absent or "none" is no network (nil);
// an object is an egress.Policy, compiled here so that a bad entry fails the load.
func network(raw json.RawMessage) (*egress.Rules, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		if mode == "none" {
			return nil, nil
		}
		return nil, fmt.Errorf(`network %q: want "none" or an object such as {"allow": ["files.example:443"]}`, clip(mode))
	}
	var p egress.Policy
	if err := strict(raw, &p); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	if len(p.Allow) == 0 {
		return nil, errors.New(`network: an empty allow list; write "none" for no network`)
	}
	r, err := egress.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	return r, nil
}

// validRuntime reports whether s has the shape of an OCI runtime's name as the
// Docker daemon registers them ("runsc", "io.containerd.runc.v2"). Whether the
// daemon knows it is checked by the backend, at its first session.
func validRuntime(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
