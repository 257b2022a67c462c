package permissions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxPolicySize bounds what ParsePolicy reads.
const maxPolicySize = 1 << 20

// policyFile is the JSON shape of a policy file; see the package comment.
type policyFile struct {
	Defaults *bool             `json:"defaults"`
	Rules    []json.RawMessage `json:"rules"`
}

// LoadPolicy reads the policy file at path; see ParsePolicy. Rules are sourced as
// "<path> rule <n>".
func LoadPolicy(path string) (Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return Policy{}, fmt.Errorf("load policy: %w", err)
	}
	defer f.Close()
	return ParsePolicy(f, path)
}

// ParsePolicy reads a JSON policy (see the package comment for the format) from r.
// Unless "defaults" is false the result starts with DefaultRules. Each rule read gets
// the Source "<source> rule <n>", counting from 1. Unknown fields, a missing or
// unknown effect, an empty capability pattern and a malformed or relative target
// pattern are errors naming the rule.
func ParsePolicy(r io.Reader, source string) (Policy, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPolicySize+1))
	if err != nil {
		return Policy{}, fmt.Errorf("parse policy: %s: %w", source, err)
	}
	if len(data) > maxPolicySize {
		return Policy{}, fmt.Errorf("parse policy: %s: larger than %d bytes", source, maxPolicySize)
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return Policy{}, fmt.Errorf("parse policy: %s: want a JSON object", source)
	}
	var f policyFile
	if err := decodeStrict(data, &f); err != nil {
		return Policy{}, fmt.Errorf("parse policy: %s: %w", source, err)
	}
	var p Policy
	if f.Defaults == nil || *f.Defaults {
		p.Rules = DefaultRules()
	}
	for i, raw := range f.Rules {
		name := fmt.Sprintf("%s rule %d", source, i+1)
		var rule Rule
		if err := decodeStrict(raw, &rule); err != nil {
			return Policy{}, fmt.Errorf("parse policy: %s: %w", name, err)
		}
		if err := rule.Validate(); err != nil {
			return Policy{}, fmt.Errorf("parse policy: %s: %w", name, err)
		}
		rule.Source = name
		p.Rules = append(p.Rules, rule)
	}
	return NewPolicy(p.Rules...), nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields, null and
// trailing data.
func decodeStrict(data []byte, v any) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return errors.New("want a JSON object, got null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
