package permissions

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExecuteCapabilities(t *testing.T) {
	t.Parallel()
	want := []Capability{
		{Name: "python.exec.stateful"},
		{Name: "filesystem.read", TargetArg: "inputs", Optional: true},
	}
	got := ExecuteCapabilities()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ExecuteCapabilities() = %+v, want %+v", got, want)
	}
	got[0].Name = "changed"
	if ExecuteCapabilities()[0].Name != PythonExecStateful {
		t.Fatal("ExecuteCapabilities returned shared state")
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	work := tempDir(t)
	writeFile(t, filepath.Join(work, "a.csv"))
	writeFile(t, filepath.Join(work, "b.csv"))
	a, b := filepath.Join(work, "a.csv"), filepath.Join(work, "b.csv")
	exec := ResolvedCapability{Name: PythonExecStateful}
	read := func(requested, target string) ResolvedCapability {
		return ResolvedCapability{Name: FilesystemRead, Requested: requested, Target: target}
	}
	problem := func(requested, problem string) ResolvedCapability {
		return ResolvedCapability{Name: FilesystemRead, Requested: requested, Problem: problem}
	}
	required := []Capability{{Name: FilesystemRead, TargetArg: "inputs"}}

	tests := []struct {
		name    string
		caps    []Capability
		args    map[string]any
		want    []ResolvedCapability
		wantErr string
	}{
		{name: "scalar", caps: ExecuteCapabilities(), args: map[string]any{"inputs": "a.csv"},
			want: []ResolvedCapability{exec, read("a.csv", a)}},
		{name: "string list in order", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []string{"b.csv", a}},
			want: []ResolvedCapability{exec, read("b.csv", b), read(a, a)}},
		{name: "JSON list in order", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{"a.csv", "b.csv"}},
			want: []ResolvedCapability{exec, read("a.csv", a), read("b.csv", b)}},
		{name: "duplicates kept", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{"a.csv", "a.csv"}},
			want: []ResolvedCapability{exec, read("a.csv", a), read("a.csv", a)}},
		{name: "each item canonicalized on its own", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{"nope", "a.csv"}},
			want: []ResolvedCapability{exec, problem("nope", "cannot resolve path: no such file or directory"), read("a.csv", a)}},
		{name: "optional absent", caps: ExecuteCapabilities(), args: map[string]any{"code": "1+1"},
			want: []ResolvedCapability{exec}},
		{name: "optional nil args", caps: ExecuteCapabilities(), args: nil,
			want: []ResolvedCapability{exec}},
		{name: "optional nil", caps: ExecuteCapabilities(), args: map[string]any{"inputs": nil},
			want: []ResolvedCapability{exec}},
		{name: "optional empty string", caps: ExecuteCapabilities(), args: map[string]any{"inputs": ""},
			want: []ResolvedCapability{exec}},
		{name: "optional empty JSON list", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{}},
			want: []ResolvedCapability{exec}},
		{name: "optional empty string list", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []string{}},
			want: []ResolvedCapability{exec}},
		{name: "empty item is a problem", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{""}},
			want: []ResolvedCapability{exec, problem("", "cannot resolve path: empty path")}},
		{name: "required empty string is a problem", caps: required, args: map[string]any{"inputs": ""},
			want: []ResolvedCapability{problem("", "cannot resolve path: empty path")}},
		{name: "required empty list", caps: required, args: map[string]any{"inputs": []any{}},
			want: nil},
		{name: "required absent", caps: required, args: map[string]any{},
			wantErr: `argument "inputs": invalid argument: required argument is missing`},
		{name: "required nil", caps: required, args: map[string]any{"inputs": nil},
			wantErr: `argument "inputs": invalid argument: required argument is missing`},
		{name: "number", caps: ExecuteCapabilities(), args: map[string]any{"inputs": 3.0},
			wantErr: `argument "inputs": invalid argument: got a number, want a path or a list of paths`},
		{name: "object", caps: ExecuteCapabilities(), args: map[string]any{"inputs": map[string]any{"a": "b"}},
			wantErr: `argument "inputs": invalid argument: got an object`},
		{name: "boolean", caps: ExecuteCapabilities(), args: map[string]any{"inputs": true},
			wantErr: `argument "inputs": invalid argument: got a boolean`},
		{name: "list with a number", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{"a.csv", 1.0}},
			wantErr: `argument "inputs": invalid argument: item 1 is a number, want a path`},
		{name: "list with nil", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{nil}},
			wantErr: `argument "inputs": invalid argument: item 0 is null`},
		{name: "nested list", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []any{[]any{"a.csv"}}},
			wantErr: `item 0 is a list`},
		{name: "other Go type", caps: ExecuteCapabilities(), args: map[string]any{"inputs": []int{1}},
			wantErr: `got []int`},
		{name: "fixed target", caps: []Capability{{Name: FilesystemRead, Target: a}},
			want: []ResolvedCapability{read(a, a)}},
		{name: "fixed relative target", caps: []Capability{{Name: FilesystemRead, Target: "b.csv"}},
			want: []ResolvedCapability{read("b.csv", b)}},
		{name: "no target", caps: []Capability{{Name: "net.none"}},
			want: []ResolvedCapability{{Name: "net.none"}}},
		{name: "unnamed capability", caps: []Capability{{TargetArg: "inputs"}},
			wantErr: "capability without a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.caps, tt.args, work)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %v, want it to contain %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("Resolve error %v does not wrap ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resolve =\n  %+v\nwant\n  %+v", got, tt.want)
			}
			for _, rc := range got {
				if strings.Contains(rc.Target, "<nil>") || strings.Contains(rc.Requested, "<nil>") {
					t.Errorf("resolved %+v mentions <nil>", rc)
				}
			}
		})
	}
}
