package egress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// Secret rule kinds.
const (
	// KindHeader sets one request header to a value made from the secret.
	KindHeader = "header"
	// KindSigV4 signs each request with AWS Signature Version 4.
	KindSigV4 = "aws_sigv4"
)

// Limits on secret rules.
const (
	// MaxSecretRules is the most secret rules of one template.
	MaxSecretRules = 32
	// MaxSecretBytes is the longest secret value read from a file or the
	// environment.
	MaxSecretBytes = 16 << 10
	// PlaceholderPrefix starts every placeholder: the kernel sees
	// "kernelbox-secret:<rule>" where the value would be.
	PlaceholderPrefix = "kernelbox-secret:"
)

// SecretRule is one entry of a template's "secrets" list as an operator writes
// it: which hosts (and paths) get a credential, and where kernelbox reads its
// value — serve's environment or a file, never the templates file itself.
//
//	{"name": "vendor", "hosts": ["api.vendor.example"], "paths": ["/v1/*"],
//	 "header": "Authorization", "value": "Bearer {secret}", "from_env": "VENDOR_KEY",
//	 "env": "VENDOR_KEY"}
type SecretRule struct {
	// Name names the rule in notes, logs and the placeholder; required.
	Name string `json:"name"`
	// Kind is KindHeader (the default) or KindSigV4.
	Kind string `json:"kind,omitempty"`
	// Hosts are the names the rule applies to, as allow entries are written
	// (an exact name or "*.suffix", optional ":port"; without a port, 443).
	// Each must be allowed by the template's network allowlist.
	Hosts []string `json:"hosts"`
	// Paths limit the rule to request paths: "/v1/*" is a prefix, anything else
	// an exact path. Defaults to every path.
	Paths []string `json:"paths,omitempty"`
	// Header is the header set (KindHeader). Defaults to "Authorization".
	Header string `json:"header,omitempty"`
	// Value is the header's value, with "{secret}" where the secret goes.
	// Defaults to "{secret}".
	Value string `json:"value,omitempty"`
	// FromEnv names a variable of kernelbox's own environment holding the
	// secret; FromFile a file holding it (a trailing newline is dropped).
	// Exactly one is set for KindHeader.
	FromEnv  string `json:"from_env,omitempty"`
	FromFile string `json:"from_file,omitempty"`
	// Env, when set, is a variable the kernel gets with the placeholder
	// "kernelbox-secret:<name>" as its value, so that SDKs that insist on a
	// key configure themselves; the proxy replaces it on the wire.
	Env string `json:"env,omitempty"`
	// AllowPlainHTTP lets the rule apply to plain-HTTP requests too (port 80
	// when a host has no port). Off by default: a secret then travels only
	// inside TLS, verified against the host's certificate.
	AllowPlainHTTP bool `json:"allow_plain_http,omitempty"`
	// AccessKeyFromEnv, SecretKeyFromEnv (and optionally SessionTokenFromEnv)
	// name kernelbox's variables holding the AWS credentials; Region and
	// Service are the signing scope ("us-east-1", "s3"). KindSigV4 only.
	AccessKeyFromEnv    string `json:"access_key_from_env,omitempty"`
	SecretKeyFromEnv    string `json:"secret_key_from_env,omitempty"`
	SessionTokenFromEnv string `json:"session_token_from_env,omitempty"`
	Region              string `json:"region,omitempty"`
	Service             string `json:"service,omitempty"`
}

// Secrets is a template's compiled secret rules with their values. The values
// are read by Compile and again by Reload, and live only here, in unexported
// fields: no method returns or prints them. It is safe for concurrent use.
type Secrets struct {
	rules []*secretRule
	mu    sync.Mutex // serialises Reload
}

// secretRule is one compiled SecretRule.
type secretRule struct {
	SecretRule
	hosts []allowEntry
	val   atomic.Pointer[secretValue]
}

// secretValue is what a rule's sources held when last read.
type secretValue struct {
	value                 string // KindHeader: the header's value, secret filled in
	access, secret, token string // KindSigV4
}

// String never shows the value.
func (v *secretValue) String() string { return "[secret]" }

// GoString never shows the value.
func (v *secretValue) GoString() string { return "[secret]" }

var (
	ruleName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// CompileSecrets checks rules against the template's allowlist (every host of a
// rule must be one the allowlist allows) and reads every value. An error names
// the rule and what is wrong, never a value.
func CompileSecrets(rules []SecretRule, allow *Rules) (*Secrets, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if allow == nil {
		return nil, errors.New(`secrets: the template has no network allowlist; a secret's hosts must be in "network"`)
	}
	if len(rules) > MaxSecretRules {
		return nil, fmt.Errorf("secrets: %d rules; the limit is %d", len(rules), MaxSecretRules)
	}
	s := &Secrets{}
	names, envs := map[string]bool{}, map[string]bool{}
	for _, r := range rules {
		cr, err := compileRule(r, allow)
		if err != nil {
			return nil, fmt.Errorf("secrets %q: %w", clip(r.Name), err)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("secrets %q: the name is used twice", r.Name)
		}
		names[r.Name] = true
		if r.Env != "" {
			if envs[r.Env] {
				return nil, fmt.Errorf("secrets %q: env %q is another rule's placeholder too", r.Name, r.Env)
			}
			envs[r.Env] = true
		}
		s.rules = append(s.rules, cr)
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// compileRule checks one rule's shape.
func compileRule(r SecretRule, allow *Rules) (*secretRule, error) {
	if r.Kind == "" {
		r.Kind = KindHeader
	}
	if !ruleName.MatchString(r.Name) {
		return nil, errors.New("name: 1-64 characters of A-Z, a-z, 0-9, '_', '-' and '.', starting with a letter or digit")
	}
	if r.Env != "" && !envVarName.MatchString(r.Env) {
		return nil, fmt.Errorf("env %q: not a variable name", clip(r.Env))
	}
	if err := checkKind(&r); err != nil {
		return nil, err
	}
	if len(r.Hosts) == 0 {
		return nil, errors.New("hosts: empty; name the hosts that get the secret")
	}
	cr := &secretRule{SecretRule: r}
	for _, h := range r.Hosts {
		e, err := parseAllow(h)
		if err != nil {
			return nil, fmt.Errorf("hosts %q: %w", clip(h), err)
		}
		if e.addr.IsValid() {
			return nil, fmt.Errorf("hosts %q: a secret goes to a name, not an address", clip(h))
		}
		for _, port := range e.secretPorts(r.AllowPlainHTTP) {
			if !allow.covers(e, port) {
				return nil, fmt.Errorf("hosts %q: port %d of it is not in the template's network allowlist", clip(h), port)
			}
		}
		cr.hosts = append(cr.hosts, e)
	}
	for _, p := range r.Paths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t\r\n") || strings.Contains(p[:max(0, len(p)-1)], "*") || path.Clean(strings.TrimSuffix(p, "*")+"x") != strings.TrimSuffix(p, "*")+"x" {
			return nil, fmt.Errorf("paths %q: want an absolute, clean path, with at most one '*', at its end (\"/v1/*\")", clip(p))
		}
	}
	return cr, nil
}

// checkKind checks the fields of the rule's kind and fills in defaults.
func checkKind(r *SecretRule) error {
	switch r.Kind {
	case KindHeader:
		if r.AccessKeyFromEnv != "" || r.SecretKeyFromEnv != "" || r.SessionTokenFromEnv != "" || r.Region != "" || r.Service != "" {
			return errors.New("access_key_from_env, secret_key_from_env, session_token_from_env, region and service are for kind aws_sigv4")
		}
		if (r.FromEnv == "") == (r.FromFile == "") {
			return errors.New("set exactly one of from_env and from_file")
		}
		if r.Header == "" {
			r.Header = "Authorization"
		}
		r.Header = http.CanonicalHeaderKey(r.Header)
		if !isToken(r.Header) || hopByHop(r.Header) || r.Header == "Host" || r.Header == "Content-Length" || r.Header == "Transfer-Encoding" {
			return fmt.Errorf("header %q: not a header a secret can go in", clip(r.Header))
		}
		if r.Value == "" {
			r.Value = "{secret}"
		}
		if strings.Count(r.Value, "{secret}") != 1 || strings.ContainsAny(r.Value, "\r\n\x00") {
			return errors.New(`value: want one "{secret}" in a single line, such as "Bearer {secret}"`)
		}
	case KindSigV4:
		if r.FromEnv != "" || r.FromFile != "" || r.Header != "" || r.Value != "" {
			return errors.New("from_env, from_file, header and value are for kind header; aws_sigv4 reads access_key_from_env and secret_key_from_env")
		}
		if r.AccessKeyFromEnv == "" || r.SecretKeyFromEnv == "" || r.Region == "" || r.Service == "" {
			return errors.New("aws_sigv4 needs access_key_from_env, secret_key_from_env, region and service")
		}
		if r.AllowPlainHTTP {
			return errors.New("allow_plain_http: aws_sigv4 signs over HTTPS only")
		}
	default:
		return fmt.Errorf("kind %q: want %q or %q", clip(r.Kind), KindHeader, KindSigV4)
	}
	return nil
}

// secretPorts are the ports a secret host entry applies to.
func (e allowEntry) secretPorts(plain bool) []int {
	switch {
	case e.port != 0:
		return []int{int(e.port)}
	case plain:
		return []int{443, 80}
	}
	return []int{443}
}

// covers says whether the allowlist allows every name e matches, on port.
func (r *Rules) covers(e allowEntry, port int) bool {
	if !e.suffix {
		_, d := r.CheckName(e.name, port)
		return d.Effect == Allow
	}
	for _, a := range r.allow {
		if a.suffix && a.allows(uint16(port)) && (e.name == a.name || strings.HasSuffix(e.name, "."+a.name)) {
			return true
		}
	}
	return false
}

// Reload reads every rule's value again (serve calls it on SIGHUP). It is all
// or nothing: when one source fails, no value changes and the error names the
// rule and the source. A connection intercepted after Reload returns uses the
// new values.
func (s *Secrets) Reload() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := make([]*secretValue, len(s.rules))
	for i, r := range s.rules {
		v, err := r.read()
		if err != nil {
			return fmt.Errorf("secrets %q: %w", r.Name, err)
		}
		vals[i] = v
	}
	for i, r := range s.rules {
		r.val.Store(vals[i])
	}
	return nil
}

// read reads a rule's sources.
func (r *secretRule) read() (*secretValue, error) {
	if r.Kind == KindSigV4 {
		v := &secretValue{}
		var err error
		if v.access, err = fromEnv("access_key_from_env", r.AccessKeyFromEnv); err != nil {
			return nil, err
		}
		if v.secret, err = fromEnv("secret_key_from_env", r.SecretKeyFromEnv); err != nil {
			return nil, err
		}
		if r.SessionTokenFromEnv != "" {
			if v.token, err = fromEnv("session_token_from_env", r.SessionTokenFromEnv); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	var sec string
	var err error
	if r.FromEnv != "" {
		sec, err = fromEnv("from_env", r.FromEnv)
	} else {
		sec, err = fromFile(r.FromFile)
	}
	if err != nil {
		return nil, err
	}
	return &secretValue{value: strings.Replace(r.Value, "{secret}", sec, 1)}, nil
}

// fromEnv reads a secret from kernelbox's environment.
func fromEnv(field, name string) (string, error) {
	if !envVarName.MatchString(name) {
		return "", fmt.Errorf("%s %q: not a variable name", field, clip(name))
	}
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return "", fmt.Errorf("%s: %s is not set in kernelbox's environment", field, name)
	case v == "":
		return "", fmt.Errorf("%s: %s is empty in kernelbox's environment", field, name)
	}
	return v, checkSecret(field+" "+name, v)
}

// fromFile reads a secret from a file, dropping one trailing newline.
func fromFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("from_file: %w", err)
	}
	defer f.Close()
	b := make([]byte, MaxSecretBytes+1)
	n, _ := io.ReadFull(f, b)
	if n > MaxSecretBytes {
		return "", fmt.Errorf("from_file %s: over %d bytes", name, MaxSecretBytes)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b[:n]), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("from_file %s: empty", name)
	}
	return v, checkSecret("from_file "+name, v)
}

// checkSecret refuses a value that cannot go in a header line.
func checkSecret(src, v string) error {
	if len(v) > MaxSecretBytes {
		return fmt.Errorf("%s: over %d bytes", src, MaxSecretBytes)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("%s: holds a control character (byte %d); a header value cannot", src, i)
		}
	}
	return nil
}

// Placeholder is what the kernel sees instead of rule name's secret.
func Placeholder(name string) string { return PlaceholderPrefix + name }

// PlaceholderEnv is the kernel's environment for the rules that name a
// variable: "VENDOR_KEY=kernelbox-secret:vendor".
func (s *Secrets) PlaceholderEnv() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, r := range s.rules {
		if r.Env != "" {
			out = append(out, r.Env+"="+Placeholder(r.Name))
		}
	}
	return out
}

// Rules returns the rules as written, values never included (they are not in
// SecretRule: only where they come from).
func (s *Secrets) Rules() []SecretRule {
	if s == nil {
		return nil
	}
	out := make([]SecretRule, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.SecretRule
		out[i].Hosts = append([]string(nil), r.Hosts...)
		out[i].Paths = append([]string(nil), r.Paths...)
	}
	return out
}

// applies says whether a connection to host:port may need a secret: whether
// any rule names the host on that port. tls is false for plain HTTP.
func (s *Secrets) applies(h Host, port int, tls bool) bool {
	if s == nil {
		return false
	}
	for _, r := range s.rules {
		if r.names(h, port, tls) {
			return true
		}
	}
	return false
}

// match returns the first rule naming host:port whose paths hold p, or nil.
func (s *Secrets) match(h Host, port int, tls bool, p string) *secretRule {
	if s == nil {
		return nil
	}
	for _, r := range s.rules {
		if r.names(h, port, tls) && r.pathMatches(p) {
			return r
		}
	}
	return nil
}

// names says whether the rule applies to host:port: an entry's own port, or
// 443 over TLS (80 in plain HTTP, only with AllowPlainHTTP) for an entry
// without one.
func (r *secretRule) names(h Host, port int, tls bool) bool {
	if h.Literal || (!tls && !r.AllowPlainHTTP) {
		return false
	}
	for _, e := range r.hosts {
		if !e.matches(h) {
			continue
		}
		switch {
		case e.port != 0:
			if int(e.port) == port {
				return true
			}
		case tls && port == 443, !tls && port == 80:
			return true
		}
	}
	return false
}

// pathMatches says whether a (clean) request path is one of the rule's.
func (r *secretRule) pathMatches(p string) bool {
	if len(r.Paths) == 0 {
		return true
	}
	for _, pat := range r.Paths {
		if pre, ok := strings.CutSuffix(pat, "*"); ok {
			if strings.HasPrefix(p, pre) {
				return true
			}
		} else if p == pat {
			return true
		}
	}
	return false
}

// hopByHop says whether a header belongs to one connection, not the request.
func hopByHop(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// WithSecrets returns a copy of r whose proxy adds the secrets of s (checked
// against r by CompileSecrets); nil s is none.
func (r *Rules) WithSecrets(s *Secrets) *Rules {
	c := *r
	c.secrets = s
	return &c
}

// Secrets returns the rules' secrets, or nil.
func (r *Rules) Secrets() *Secrets {
	if r == nil {
		return nil
	}
	return r.secrets
}
