package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// secrets reads the "secrets" field: a list of egress.SecretRule, checked
// against the template's allowlist, whose values are read now (from serve's
// environment or files: never from the templates file). It returns the
// allowlist with the secrets attached.
func secrets(raw json.RawMessage, network *egress.Rules, env map[string]string) (*egress.Rules, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return network, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New(`secrets: want a list of rules such as [{"name": "vendor", "hosts": ["api.vendor.example"], "header": "Authorization", "value": "Bearer {secret}", "from_env": "VENDOR_KEY"}]`)
	}
	rules := make([]egress.SecretRule, len(list))
	for i, r := range list {
		if err := strict(r, &rules[i]); err != nil {
			return nil, fmt.Errorf("secrets #%d: %w", i+1, err)
		}
	}
	if network == nil {
		return nil, errors.New(`secrets: the template has no network allowlist; a secret's hosts must be in "network"`)
	}
	s, err := egress.CompileSecrets(rules, network)
	if err != nil {
		return nil, err
	}
	for _, k := range egress.CAEnv {
		if _, ok := env[k]; ok {
			return nil, fmt.Errorf("env %q: a template with secrets has it set by kernelbox (the bundle of the system's roots and kernelbox's CA)", k)
		}
	}
	for _, r := range s.Rules() {
		if r.Env == "" {
			continue
		}
		if _, ok := env[r.Env]; ok {
			return nil, fmt.Errorf("secrets %q: env %q is also in the template's env", r.Name, r.Env)
		}
		if executor.ReservedEnv(r.Env) || slices.Contains(egress.CAEnv, r.Env) {
			return nil, fmt.Errorf("secrets %q: env %q: kernelbox sets this variable itself", r.Name, r.Env)
		}
	}
	return network.WithSecrets(s), nil
}
