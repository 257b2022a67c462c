package swarm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/egress"
)

// configAPI is a manager that only creates configs, failing the first fail
// creates; it keeps what it was given.
type configAPI struct {
	swarmAPI
	fail    int
	created []client.ConfigCreateOptions
}

func (a *configAPI) ConfigCreate(_ context.Context, o client.ConfigCreateOptions) (client.ConfigCreateResult, error) {
	if a.fail > 0 {
		a.fail--
		return client.ConfigCreateResult{}, errors.New("manager busy")
	}
	a.created = append(a.created, o)
	return client.ConfigCreateResult{ID: "cfg" + strings.Repeat("x", len(a.created))}, nil
}

// A template with secrets gets the CA bundle as a read-only config at
// caBundlePath, the variables that name it and the placeholders; never the
// value, in the spec or the config. One bundle config serves every session,
// and a failed create is tried again by the next session.
func TestServiceSpecSecrets(t *testing.T) {
	const value = "swarm-spec-s3cr3t-93ab"
	t.Setenv("KB_SWARM_SPEC_KEY", value)
	allow, err := egress.Compile(egress.Policy{Allow: []string{"api.test:443"}})
	require.NoError(t, err)
	sec, err := egress.CompileSecrets([]egress.SecretRule{{Name: "vendor", Hosts: []string{"api.test:443"},
		Header: "Authorization", Value: "Bearer {secret}", FromEnv: "KB_SWARM_SPEC_KEY", Env: "VENDOR_KEY"}}, allow)
	require.NoError(t, err)
	rules := allow.WithSecrets(sec)
	api := &configAPI{fail: 1}
	b := testBackend(t, Options{})
	b.api = api

	l := &launch{obj: sessionObjects{name: "kernelbox-abcd", session: "s1", network: "net1", secret: "sec1"}, cfg: b.cfg}
	_, err = b.prepareSecrets(context.Background(), l, rules)
	require.ErrorContains(t, err, "manager busy")
	ic, err := b.prepareSecrets(context.Background(), l, rules)
	require.NoError(t, err)
	require.NotNil(t, ic)
	require.NotNil(t, ic.CA)
	l2 := &launch{obj: l.obj, cfg: b.cfg}
	ic2, err := b.prepareSecrets(context.Background(), l2, rules)
	require.NoError(t, err)
	assert.Same(t, ic, ic2, "one CA per backend")
	require.Len(t, api.created, 1, "one bundle config per backend")
	assert.Contains(t, string(api.created[0].Spec.Data), string(ic.CA.CertPEM()), "the bundle holds the CA's certificate")
	assert.Equal(t, b.instance, api.created[0].Spec.Labels["io.kernelbox.instance"], "removed with the backend's other objects")
	assert.Equal(t, []keptConfig{{ID: "cfgx", Name: api.created[0].Spec.Name}}, b.oldConfigs, "kept with the configs the state file lists")

	spec := b.serviceSpec(l.obj, l.cfg)
	cs := spec.TaskTemplate.ContainerSpec
	var mounted bool
	for _, c := range cs.Configs {
		if c.File.Name == caBundlePath {
			mounted = true
			assert.Equal(t, "cfgx", c.ConfigID)
			assert.Equal(t, uint32(0o444), uint32(c.File.Mode), "read-only")
			assert.Equal(t, "0", c.File.UID, "owned by root")
		}
	}
	assert.True(t, mounted, "the bundle is mounted: %+v", cs.Configs)
	for _, k := range egress.CAEnv {
		assert.Contains(t, cs.Env, k+"="+caBundlePath)
	}
	assert.Contains(t, cs.Env, "VENDOR_KEY=kernelbox-secret:vendor")
	all := strings.Join(cs.Env, "\n") + strings.Join(cs.Command, "\n") + string(api.created[0].Spec.Data)
	assert.NotContains(t, all, value, "the value is nowhere in the spec or the config")

	// Without secrets: no bundle, no variables.
	plain := &launch{obj: sessionObjects{name: "kernelbox-ef01", session: "s2"}, cfg: b.cfg}
	ic, err = b.prepareSecrets(context.Background(), plain, allow)
	require.NoError(t, err)
	assert.Nil(t, ic)
	assert.NotContains(t, strings.Join(b.serviceSpec(plain.obj, plain.cfg).TaskTemplate.ContainerSpec.Env, " "), "SSL_CERT_FILE")
}
