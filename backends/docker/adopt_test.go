package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/client"
)

func TestContainerName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		session, tmpl string
		warm          bool
		want          string
	}{
		{"alice", "analyst", false, "kernelbox-alice-0123abcd"},
		{".warm-5f3a", "analyst", true, "kernelbox-warm.analyst-0123abcd"},
		{".warm-5f3a", "", true, "kernelbox-warm.default-0123abcd"},
		{"warm", "", false, "kernelbox-warm-0123abcd"}, // a session called warm is not a pool's
		{"a b/c", "", false, "kernelbox-a_b_c-0123abcd"},
		{"", "", false, "kernelbox-_-0123abcd"},
		{strings.Repeat("\x00", 100), "", false, "kernelbox-" + strings.Repeat("_", 64) + "-0123abcd"},
	} {
		if got := containerName(tt.session, tt.tmpl, tt.warm, "0123abcd"); got != tt.want {
			t.Errorf("containerName(%q, %q, %v) = %q, want %q", tt.session, tt.tmpl, tt.warm, got, tt.want)
		}
	}
}

// renameAPI records renames, failing them with err.
type renameAPI struct {
	*fakeAPI
	renamed []string
	err     error
}

func (f *renameAPI) ContainerRename(_ context.Context, id string, o client.ContainerRenameOptions) (client.ContainerRenameResult, error) {
	if f.err != nil {
		return client.ContainerRenameResult{}, f.err
	}
	f.renamed = append(f.renamed, id+" "+o.NewName)
	return client.ContainerRenameResult{}, nil
}

// Adopt renames a warm container after its session, once; a failed rename leaves
// the name as it was.
func TestAdoptRenames(t *testing.T) {
	t.Parallel()
	f := &renameAPI{fakeAPI: &fakeAPI{images: map[string]bool{DefaultImage: true}}}
	b := newFakeBackend(t, f.fakeAPI)
	b.api = f
	p := &Placement{b: b, id: "c1", key: "0123abcd", name: "kernelbox-warm.analyst-0123abcd", session: ".warm-5f3a"}
	if err := p.Adopt(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := p.Adopt(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if len(f.renamed) != 1 || f.renamed[0] != "c1 kernelbox-alice-0123abcd" {
		t.Errorf("renames = %q", f.renamed)
	}
	if name, session := p.names(); name != "kernelbox-alice-0123abcd" || session != "alice" {
		t.Errorf("names = %q, %q", name, session)
	}
	f.err = errors.New("daemon busy")
	err := p.Adopt(context.Background(), "bob")
	if err == nil || err.Error() != "rename container kernelbox-alice-0123abcd to kernelbox-bob-0123abcd: daemon busy" {
		t.Errorf("Adopt = %v", err)
	}
	if p.Name() != "kernelbox-alice-0123abcd" {
		t.Errorf("after a failed rename the name is %q", p.Name())
	}
}
