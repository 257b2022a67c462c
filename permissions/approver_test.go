package permissions

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("tty gone") }

func TestPromptApprover(t *testing.T) {
	t.Parallel()
	d := Decision{
		Capability: ResolvedCapability{Name: FilesystemRead, Requested: "/x/y", Target: "/x/y"},
		Effect:     Ask,
		Reason:     "no rule matched",
	}
	tests := []struct {
		name    string
		in      io.Reader
		want    bool
		wantErr string
	}{
		{name: "y", in: strings.NewReader("y\n"), want: true},
		{name: "yes", in: strings.NewReader("yes\n"), want: true},
		{name: "upper", in: strings.NewReader("YES\n"), want: true},
		{name: "spaces and CRLF", in: strings.NewReader("  Y \r\n"), want: true},
		{name: "n", in: strings.NewReader("n\n")},
		{name: "no", in: strings.NewReader("no\n")},
		{name: "empty line", in: strings.NewReader("\n")},
		{name: "yess", in: strings.NewReader("yess\n")},
		{name: "y later in line", in: strings.NewReader("ok y\n")},
		{name: "EOF", in: strings.NewReader(""), wantErr: "no answer before end of input"},
		{name: "y then EOF", in: strings.NewReader("y"), wantErr: "no answer before end of input"},
		{name: "read error", in: errReader{}, wantErr: "tty gone"},
		{name: "too long", in: strings.NewReader(strings.Repeat("y", 5000) + "\n"), wantErr: "answer too long"},
		{name: "no input", in: nil, wantErr: "no input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			p := &PromptApprover{In: tt.in, Out: &out}
			got, err := p.Approve(context.Background(), d)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got {
					t.Fatalf("Approve = %v, %v; want false and an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Approve = %v, %v; want %v", got, err, tt.want)
			}
			if want := "Allow filesystem.read on /x/y? [y/N] "; out.String() != want {
				t.Errorf("prompt = %q, want %q", out.String(), want)
			}
		})
	}
}

func TestPromptApproverDetails(t *testing.T) {
	t.Parallel()
	t.Run("reads no further than the answer", func(t *testing.T) {
		t.Parallel()
		p := &PromptApprover{In: strings.NewReader("y\nn\nyes\n")}
		var got []bool
		for range 3 {
			ok, err := p.Approve(context.Background(), Decision{Capability: ResolvedCapability{Name: PythonExecStateful}})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ok)
		}
		if got[0] != true || got[1] != false || got[2] != true {
			t.Fatalf("answers = %v, want [true false true]", got)
		}
	})
	t.Run("names the rule and the symlink", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		p := &PromptApprover{In: strings.NewReader("n\n"), Out: &out}
		d := Decision{
			Capability: ResolvedCapability{Name: FilesystemRead, Requested: "data/link", Target: "/w/secrets/t\nAllow"},
			Effect:     Ask,
			Reason:     `approval required by rule "secrets" (p.json rule 4)`,
		}
		if _, err := p.Approve(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		want := "approval required by rule \"secrets\" (p.json rule 4).\n" +
			`Allow filesystem.read on "/w/secrets/t\nAllow" (requested as "data/link")? [y/N] `
		if out.String() != want {
			t.Errorf("prompt =\n%q\nwant\n%q", out.String(), want)
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p := &PromptApprover{In: strings.NewReader("y\n")}
		if ok, err := p.Approve(ctx, Decision{}); ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("Approve = %v, %v; want false, context.Canceled", ok, err)
		}
	})
	t.Run("nil", func(t *testing.T) {
		t.Parallel()
		var p *PromptApprover
		if ok, err := p.Approve(context.Background(), Decision{}); ok || err == nil {
			t.Fatalf("Approve = %v, %v; want an error", ok, err)
		}
		var f ApproverFunc
		if ok, err := f.Approve(context.Background(), Decision{}); ok || err == nil {
			t.Fatalf("nil ApproverFunc = %v, %v; want an error", ok, err)
		}
	})
}
