package api

import "regexp"

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
	// Sessions is how many live sessions use it.
	Sessions int `json:"sessions"`
}

// NetworkInfo is a template's network setting as shown to clients and models.
type NetworkInfo struct {
	// Mode is "none" (no network at all: only the kernel's own loopback) or
	// "allowlist" (the names in Allow, through kernelbox's egress proxy).
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
