package docker

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/kernelbox/kernelbox/egress"
)

// A template's secrets (egress.Secrets, on its network allowlist) are added by
// the session's egress proxy, which terminates TLS for their hosts with
// certificates from a CA made in this process's memory: its key is never
// written. The kernel gets the CA's certificate in a bundle with the system's
// roots, in the container's read-only state directory, named by the usual
// variables; and, for rules that name one, a placeholder variable
// ("VENDOR_KEY=kernelbox-secret:vendor"). The secret's value never reaches the
// container: not its environment, not a file.

// caBundleName is the bundle's name in the state directory.
const caBundleName = "ca-bundle.pem"

// secretsCA is the backend's interception CA and the kernels' bundle, made
// once, for the first session whose template has secrets.
type secretsCA struct {
	once   sync.Once
	ic     *egress.Intercept
	bundle []byte
	err    error
}

// get makes the CA and bundle on first use.
func (s *secretsCA) get(c config) (*egress.Intercept, []byte, error) {
	s.once.Do(func() {
		ca, err := egress.NewCA()
		if err != nil {
			s.err = err
			return
		}
		if s.bundle, s.err = ca.Bundle(""); s.err == nil {
			s.ic = &egress.Intercept{CA: ca, UpstreamRoots: c.egressUpstreamRoots}
		}
	})
	return s.ic, s.bundle, s.err
}

// intercept is what the session's proxy needs for rules' secrets; nil when
// there are none.
func (b *Backend) intercept(rules *egress.Rules) (*egress.Intercept, error) {
	if rules.Secrets() == nil {
		return nil, nil
	}
	ic, _, err := b.secrets.get(b.cfg)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return ic, nil
}

// writeCABundle writes the kernels' bundle into the session's state directory
// (mounted read-only at containerSocketDir) when its template has secrets.
func (b *Backend) writeCABundle(l *launch) error {
	if l.spec.Template.Network.Secrets() == nil {
		return nil
	}
	_, bundle, err := b.secrets.get(b.cfg)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	// World-readable: it holds only certificates, and the kernel's user reads it.
	if err := os.WriteFile(filepath.Join(l.sockDir, caBundleName), bundle, 0o644); err != nil {
		return fmt.Errorf("secrets: CA bundle: %w", err)
	}
	return nil
}

// secretsEnv is what the kernel's environment gets for a template's secrets:
// the bundle's path in each variable TLS clients read, and the placeholders.
func secretsEnv(s *egress.Secrets) []string {
	if s == nil {
		return nil
	}
	var env []string
	for _, k := range egress.CAEnv {
		env = append(env, k+"="+path.Join(containerSocketDir, caBundleName))
	}
	return append(env, s.PlaceholderEnv()...)
}
