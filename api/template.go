package api

import (
	"regexp"
	"slices"
	"strings"
)

// TemplateNamePattern is the rule every template name follows: 1 to 64 characters of
// a-z, A-Z, 0-9, '_', '-' and '.', starting with a letter or digit.
const TemplateNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`

// TemplateNameRule says the rule in words, for error messages and tool descriptions.
const TemplateNameRule = "1-64 characters of A-Z, a-z, 0-9, '_', '-' and '.', starting with a letter or digit"

var templateName = regexp.MustCompile(TemplateNamePattern)

// ValidTemplateName reports whether name follows [TemplateNamePattern].
func ValidTemplateName(name string) bool { return templateName.MatchString(name) }

// CreateSessionBody is the JSON body of POST /v1/sessions.
type CreateSessionBody struct {
	ID       string `json:"id"`
	Template string `json:"template,omitempty"`
}

// TemplateInfo is one template as GET /v1/templates lists it, with its effective
// settings: what its sessions get, the server's own value where the template sets
// none. Zero limits mean none (or, for a backend without limits, not applicable).
type TemplateInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Kernel is the kernelspec its sessions start.
	Kernel string `json:"kernel"`
	// KernelNames are Jupyter kernel names (a notebook's kernelspec name, a
	// gateway start request's name) that choose this template; see
	// [TemplateForKernel].
	KernelNames []string `json:"kernel_names,omitempty"`
	// Image is the container image (docker), or "".
	Image string `json:"image,omitempty"`
	// Runtime is the OCI runtime its containers run under (docker), for example
	// "runsc" for gVisor; "" is the server's own (its --runtime, else the daemon's
	// default).
	Runtime string `json:"runtime,omitempty"`
	// MemoryBytes, CPUs and Pids are the container limits (docker).
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	// Env lists the names of the variables it sets (their values are not shown).
	Env []string `json:"env,omitempty"`
	// Preload says whether fresh kernels run a preload cell, PreloadBytes its size.
	Preload      bool `json:"preload"`
	PreloadBytes int  `json:"preload_bytes,omitempty"`
	// PreloadTimeoutSeconds bounds the preload in each fresh kernel (0: no preload).
	PreloadTimeoutSeconds float64 `json:"preload_timeout_seconds,omitempty"`
	// Warm is its warm pool's size, WarmReady the kernels ready in it now.
	Warm      int `json:"warm"`
	WarmReady int `json:"warm_ready"`
	// IdleTimeoutSeconds closes idle sessions (0: never); MaxLifetimeSeconds is
	// the container's hard limit (docker; 0: not applicable).
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds"`
	MaxLifetimeSeconds float64 `json:"max_lifetime_seconds,omitempty"`
	// HibernateAfterSeconds hibernates idle Python sessions (0: never);
	// Checkpoint is "after_call" when its sessions' variables are saved after
	// each call, to come back after a kernel death, else "".
	HibernateAfterSeconds float64 `json:"hibernate_after_seconds,omitempty"`
	Checkpoint            string  `json:"checkpoint,omitempty"`
	// Data lists the data mounts' names (at data/<name>).
	Data []string `json:"data,omitempty"`
	// Network is what its sessions may reach over the network.
	Network *NetworkInfo `json:"network,omitempty"`
	// Secrets are the credentials kernelbox's egress proxy adds to its
	// sessions' requests to named hosts: where and how, never the value.
	Secrets []SecretInfo `json:"secrets,omitempty"`
	// Sessions is how many live sessions use it.
	Sessions int `json:"sessions"`
}

// The modes of NetworkInfo.
const (
	NetworkNone      = "none"
	NetworkAllowlist = "allowlist"
)

// NetworkInfo is a template's network setting as shown to clients and models.
type NetworkInfo struct {
	// Mode is NetworkNone (no network at all: only the kernel's own loopback)
	// or NetworkAllowlist (the names in Allow, through kernelbox's egress proxy).
	Mode string `json:"mode"`
	// Allow lists the host entries ("files.example", "*.data.example:443"); an
	// entry without a port allows 80 and 443.
	Allow []string `json:"allow,omitempty"`
	// CIDRs are special-purpose ranges the proxy may dial for an allowed name.
	CIDRs []string `json:"cidrs,omitempty"`
	// MaxBytes and MaxConns are the per-session limits (bytes both ways over the
	// session's life; concurrent connections).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	MaxConns int   `json:"max_conns,omitempty"`
}

// DefaultTemplateName is the template a session gets when it names none.
const DefaultTemplateName = "default"

// KernelLanguage names the language of a kernelspec name as Jupyter's own
// kernelspecs do: "python3" (and "", and any "python…") is "python", "ir" is "R";
// any other name is its own language.
func KernelLanguage(kernel string) string {
	switch k := strings.ToLower(kernel); {
	case k == "" || strings.HasPrefix(k, "python"):
		return "python"
	case k == "ir":
		return "R"
	default:
		return kernel
	}
}

// languageKernelNames are the Jupyter kernel names nearly every notebook written
// elsewhere carries, with the language each stands for.
var languageKernelNames = map[string]string{"python3": "python", "python": "python", "ir": "R"}

// TemplateForKernel returns the template a start request or a notebook naming the
// Jupyter kernel name chooses, from the templates ts: the template of that name; else
// the one listing it in KernelNames; else, for a language's kernel name ("python3",
// "python", "ir"), the default template when it runs that language, or the first
// template by name that does. It reports false when none fits.
func TemplateForKernel(ts []TemplateInfo, name string) (string, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t.Name, true
		}
	}
	for _, t := range ts {
		if slices.Contains(t.KernelNames, name) {
			return t.Name, true
		}
	}
	lang, ok := languageKernelNames[name]
	if !ok {
		return "", false
	}
	best := ""
	for _, t := range ts {
		if KernelLanguage(t.Kernel) != lang {
			continue
		}
		if t.Name == DefaultTemplateName {
			return t.Name, true
		}
		if best == "" || t.Name < best {
			best = t.Name
		}
	}
	return best, best != ""
}

// KernelAliases returns the Jupyter kernel names that choose a template without
// being one's name (each template's KernelNames, and "python3", "python" and "ir"
// when a template runs that language), with the template each chooses.
func KernelAliases(ts []TemplateInfo) map[string]string {
	names := map[string]bool{}
	for n := range languageKernelNames {
		names[n] = true
	}
	for _, t := range ts {
		for _, n := range t.KernelNames {
			names[n] = true
		}
	}
	for _, t := range ts {
		delete(names, t.Name)
	}
	out := map[string]string{}
	for n := range names {
		if t, ok := TemplateForKernel(ts, n); ok {
			out[n] = t
		}
	}
	return out
}

// SecretInfo is one secret rule of a template as shown to clients and models:
// which requests get a credential the kernel never sees. The value is never
// shown, nor where kernelbox reads it from.
type SecretInfo struct {
	// Name names the rule; the kernel's placeholder is "kernelbox-secret:<name>".
	Name string `json:"name"`
	// Kind is "header" or "aws_sigv4".
	Kind string `json:"kind"`
	// Hosts and Paths are the requests the credential is added to.
	Hosts []string `json:"hosts"`
	Paths []string `json:"paths,omitempty"`
	// Header is the header set (kind header).
	Header string `json:"header,omitempty"`
	// Env is the kernel's variable holding the placeholder, if any.
	Env string `json:"env,omitempty"`
	// Region and Service are the signing scope (kind aws_sigv4).
	Region  string `json:"region,omitempty"`
	Service string `json:"service,omitempty"`
	// AllowPlainHTTP says the credential also goes over plain HTTP.
	AllowPlainHTTP bool `json:"allow_plain_http,omitempty"`
}

// OwnKernelName is the kernelspec kernelbox installs on the servers it starts, behind the
// names "" and "python3": an implementation detail, never listed to a client as a kernel
// it could choose.
const OwnKernelName = "kernelbox-python3"
