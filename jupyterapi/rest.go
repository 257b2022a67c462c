package jupyterapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/jupyter"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/tokens"
)

// APIVersion is what GET /api answers as the version: the Jupyter Server whose
// gateway client this API is tested with.
const APIVersion = "1.23.3"

func (g *Gateway) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": APIVersion, "server": "kernelbox"})
}

// KernelSpec is one template as a Jupyter kernelspec (GET /api/kernelspecs/{name}).
type KernelSpec struct {
	Name      string            `json:"name"`
	Spec      Spec              `json:"spec"`
	Resources map[string]string `json:"resources"`
}

// Spec is a kernelspec's "spec" object.
type Spec struct {
	DisplayName   string         `json:"display_name"`
	Language      string         `json:"language"`
	Argv          []string       `json:"argv"`
	Env           map[string]any `json:"env"`
	InterruptMode string         `json:"interrupt_mode"`
	Metadata      map[string]any `json:"metadata"`
}

// KernelSpecs is the answer of GET /api/kernelspecs.
type KernelSpecs struct {
	Default     string                `json:"default"`
	KernelSpecs map[string]KernelSpec `json:"kernelspecs"`
}

// specOf returns a template's kernelspec: its name, a display name from its
// description, the language of its kernel.
func specOf(t api.TemplateInfo) KernelSpec {
	display := t.Name
	if t.Description != "" {
		display = t.Name + " — " + t.Description
	}
	return KernelSpec{
		Name: t.Name,
		Spec: Spec{
			DisplayName: "kernelbox: " + display, Language: languageOf(t.Kernel),
			Argv: []string{}, Env: map[string]any{}, InterruptMode: "signal",
			Metadata: map[string]any{"kernelbox": map[string]any{"template": t.Name, "kernel": t.Kernel, "warm": t.Warm}},
		},
		Resources: map[string]string{},
	}
}

// languageOf names the language of a kernelspec name, as Jupyter's own
// kernelspecs do ("python3" is python, "ir" is R).
func languageOf(kernel string) string { return api.KernelLanguage(kernel) }

// aliasSpec is the kernelspec of a Jupyter kernel name that chooses template t
// (api.KernelAliases): listed so that a notebook saved elsewhere with that name
// opens without a "kernel not found" dialog.
func aliasSpec(alias string, t api.TemplateInfo) KernelSpec {
	s := specOf(t)
	s.Name = alias
	s.Spec.DisplayName += " (as " + alias + ")"
	return s
}

// specs returns every kernelspec: one per template, and one per kernel name that
// chooses a template.
func (g *Gateway) specs() map[string]KernelSpec {
	ts := g.e.TemplateInfos()
	out := make(map[string]KernelSpec, len(ts)+3)
	byName := make(map[string]api.TemplateInfo, len(ts))
	for _, t := range ts {
		out[t.Name] = specOf(t)
		byName[t.Name] = t
	}
	for alias, t := range api.KernelAliases(ts) {
		out[alias] = aliasSpec(alias, byName[t])
	}
	return out
}

func (g *Gateway) kernelspecs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, KernelSpecs{Default: api.DefaultTemplateName, KernelSpecs: g.specs()})
}

func (g *Gateway) kernelspec(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s, ok := g.specs()[name]; ok {
		writeJSON(w, http.StatusOK, s)
		return
	}
	writeError(w, http.StatusNotFound, "kernelspec "+quote(name)+" not found: the kernelspecs are this server's templates (GET /api/kernelspecs)")
}

// Kernel is a kernel as the API shows it: Jupyter's kernel model, the one
// kernelbox's own gateway client reads.
type Kernel = jupyter.Kernel

// lastActivityLayout is the form Jupyter Server's gateway client parses
// ("%Y-%m-%dT%H:%M:%S.%fZ").
const lastActivityLayout = "2006-01-02T15:04:05.000000Z"

func modelOf(k *kernel, s api.SessionInfo) Kernel {
	state := string(s.State)
	switch s.State {
	case api.StateNew, api.StateStarting, api.StateRestoring:
		state = "starting"
	case api.StateHibernated:
		state = "idle"
	}
	name := s.Template
	if k.name != "" {
		name = k.name // a notebook asking for "python3" keeps its kernelspec
	}
	return Kernel{ID: s.ID, Name: name, LastActivity: s.LastActivity.UTC().Format(lastActivityLayout),
		ExecutionState: state, Connections: k.connections()}
}

func (g *Gateway) listKernels(w http.ResponseWriter, r *http.Request) {
	g.prune()
	g.mu.Lock()
	ks := make(map[string]*kernel, len(g.kernels))
	for id, k := range g.kernels {
		ks[id] = k
	}
	g.mu.Unlock()
	out := []Kernel{}
	p := tokens.FromContext(r.Context())
	for _, s := range g.e.Sessions() {
		if !p.IsAdmin() && g.o.Tokens != nil && !p.MaySee(s.ID, g.o.Tokens.Owner(s.ID)) {
			continue // out of a scoped token's reach
		}
		k := ks[s.ID]
		if k == nil {
			k = newKernel(s.ID) // an agent's session no client has opened
		}
		out = append(out, modelOf(k, s))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getKernel(w http.ResponseWriter, r *http.Request) {
	if k, s, ok := g.lookupHTTP(w, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, modelOf(k, s))
	}
}

func (g *Gateway) deleteKernel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	k, _, ok := g.lookupHTTP(w, id)
	if !ok || g.refuseReadOnly(w, k) {
		return
	}
	if err := g.e.CloseSession(r.Context(), id); err != nil {
		writeExecError(w, err)
		return
	}
	g.mu.Lock()
	delete(g.kernels, id)
	g.mu.Unlock()
	for _, c := range k.clientList() {
		c.drop(closeNormal, "the kernel was shut down")
	}
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gateway) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if k, _, ok := g.lookupHTTP(w, id); !ok || g.refuseReadOnly(w, k) {
		return
	}
	if err := g.e.Interrupt(r.Context(), id); err != nil {
		writeExecError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// restart gives the kernel a fresh interpreter, as Jupyter's restart does: a
// running call is interrupted first (a restart does not wait for it), then
// the session is reset (its files stay).
func (g *Gateway) restart(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	k, _, ok := g.lookupHTTP(w, id)
	if !ok || g.refuseReadOnly(w, k) {
		return
	}
	if err := g.e.Interrupt(r.Context(), id); err != nil {
		writeExecError(w, err)
		return
	}
	k.broadcast(statusFrame(k, nil, "restarting"))
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	if err := g.e.ResetSession(ctx, id); err != nil {
		writeExecError(w, err)
		return
	}
	if _, err := g.e.StartKernel(ctx, id, ""); err != nil {
		writeExecError(w, err)
		return
	}
	k.broadcast(statusFrame(k, nil, "starting"))
	k.broadcast(statusFrame(k, nil, "idle"))
	_, s, ok := g.lookupHTTP(w, id)
	if ok {
		writeJSON(w, http.StatusOK, modelOf(k, s))
	}
}

// refuseReadOnly answers 403 when k may only be watched (watch.go).
func (g *Gateway) refuseReadOnly(w http.ResponseWriter, k *kernel) bool {
	if !g.readOnly(k) {
		return false
	}
	writeError(w, http.StatusForbidden, readOnlyWhy(k.id))
	return true
}

// errorBody is an error answer in the shape Jupyter's clients read.
type errorBody struct {
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Message: msg, Reason: http.StatusText(status)})
}

// writeExecError answers an executor error with its status (api.CodeOf).
func writeExecError(w http.ResponseWriter, err error) {
	code, status := api.CodeOf(err)
	writeJSON(w, status, errorBody{Message: err.Error(), Reason: string(code)})
}

// quote quotes a client's string for a message, clipped.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
