package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/egress"
)

// A template's secrets (egress.Secrets, on its network allowlist) are added by
// the session's egress proxy (egress.go), which terminates TLS for their hosts
// with certificates from a CA made in kernelbox's memory: its key is never
// written. The task gets the CA's certificate in a bundle with the system's
// roots (kernelbox's own, as the docker backend does), a swarm config of the
// backend's mounted read-only at caBundlePath, named by the variables TLS
// clients read (egress.CAEnv); and, for rules that name one, a placeholder
// variable ("VENDOR_KEY=kernelbox-secret:vendor"). The secret's value stays in
// kernelbox's process: not in the service's spec, its environment, a config or
// a secret of the swarm.
//
// The CA lives as long as the process. A session adopted by a later process
// (reattach.go) has a bundle naming the old CA, which nobody holds any more:
// its proxy is given the allowlist alone (keep.go keeps no secrets), so a
// request to a secret's host goes through as an untouched tunnel and gets no
// secret.

// caBundlePath is where a task finds the bundle.
const caBundlePath = stateDir + "/ca-bundle.pem"

// secretsCA is the backend's interception CA and the bundle config, made for
// the first session whose template has secrets. A failed config create is
// tried again by the next such session.
type secretsCA struct {
	mu     sync.Mutex
	ic     *egress.Intercept
	bundle []byte
	config swarmConfig // "" id until created
}

// prepareSecrets readies a session whose template has secrets: the CA, the
// bundle config (l.obj.caBundle, which serviceSpec mounts) and the variables.
// It returns what the session's proxy needs to add them; nil without secrets.
func (b *Backend) prepareSecrets(ctx context.Context, l *launch, rules *egress.Rules) (*egress.Intercept, error) {
	s := rules.Secrets()
	if s == nil {
		return nil, nil
	}
	ic, cf, err := b.secrets.get(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	l.obj.caBundle = cf
	env := slices.Clone(l.cfg.Env)
	for _, k := range egress.CAEnv {
		env = append(env, k+"="+caBundlePath)
	}
	l.cfg.Env = append(env, s.PlaceholderEnv()...)
	return ic, nil
}

// get makes the CA and the bundle on first use, and the bundle's config until
// one is made.
func (s *secretsCA) get(ctx context.Context, b *Backend) (*egress.Intercept, swarmConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ic == nil {
		ca, err := egress.NewCA()
		if err != nil {
			return nil, swarmConfig{}, err
		}
		bundle, err := ca.Bundle("")
		if err != nil {
			return nil, swarmConfig{}, err
		}
		s.ic, s.bundle = &egress.Intercept{CA: ca, UpstreamRoots: b.cfg.egressUpstreamRoots}, bundle
	}
	if s.config.id == "" {
		sum := sha256.Sum256(s.bundle)
		name := "kernelbox-" + b.instance[:8] + "-cabundle-" + hex.EncodeToString(sum[:4])
		r, err := b.api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
			Annotations: swarm.Annotations{Name: name, Labels: b.labels("")}, Data: s.bundle,
		}})
		if err != nil {
			return nil, swarmConfig{}, fmt.Errorf("create config %s: %w", name, err)
		}
		s.config = swarmConfig{id: r.ID, name: name}
		// Listed with the configs the state file keeps (through its
		// writes' gate): a session kept for the next start still uses it.
		b.keptFile.Save(func() { b.oldConfigs = append(b.oldConfigs, keptConfig{ID: r.ID, Name: name}) })
	}
	return s.ic, s.config, nil
}
