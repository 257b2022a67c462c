package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/statefile"
	"github.com/kernelbox/kernelbox/jupyter"
)

// TestReadKept: the state file is refused whole when it is not one (corrupt,
// another format, another boot), and a record of the wrong shape is dropped, so
// that a tampered file cannot steer the backend to another container or path.
func TestReadKept(t *testing.T) {
	t.Parallel()
	self := owner{host: "h", boot: "b", pid: 1, start: "1"}
	root := "/run/kb"
	good := keptContainer{ID: strings.Repeat("a", 64), Key: "0123abcd", Name: "kernelbox-s1-0123abcd", Session: "s1",
		SockDir: root + "/" + socketRootPrefix + "x/0123abcd", Token: strings.Repeat("f", 64)}
	write := func(t *testing.T, v any) string {
		p := filepath.Join(t.TempDir(), "docker.json")
		var b []byte
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else {
			var err error
			if b, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := statefile.Write(p, b, true); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("state file mode: %v %v", fi, err)
		}
		return p
	}
	state := func(cs ...keptContainer) keptState {
		return keptState{Version: keptVersion, Host: "h", Boot: "b", Containers: cs}
	}
	if kept, _, err := readKept(filepath.Join(t.TempDir(), "none.json"), root, self); err != nil || kept != nil {
		t.Fatalf("a missing file is no state: %v %v", kept, err)
	}
	for name, v := range map[string]any{
		"corrupt":  `{"version": 1, "containers": [`,
		"version":  keptState{Version: 9, Host: "h", Boot: "b"},
		"rebooted": keptState{Version: keptVersion, Host: "h", Boot: "other"},
	} {
		if _, _, err := readKept(write(t, v), root, self); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	initStart, _, err := procStart(1)
	if err != nil {
		t.Fatal(err)
	}
	inUse := state(good)
	inUse.Pid, inUse.Start = 1, initStart // a process that still runs holds it
	if _, _, err := readKept(write(t, inUse), root, self); !errors.Is(err, ErrStateInUse) {
		t.Errorf("a state file held by a running process: %v", err)
	}
	bad := map[string]func(*keptContainer){
		"id":      func(k *keptContainer) { k.ID = "abc" },
		"key":     func(k *keptContainer) { k.Key = "../../x" },
		"session": func(k *keptContainer) { k.Session = "../s" },
		"name":    func(k *keptContainer) { k.Name = "kernelbox-other-0123abcd" },
		"warmkey": func(k *keptContainer) { k.Name = "kernelbox-warm.default-ffffffff" },
		"warmbad": func(k *keptContainer) { k.Name = "kernelbox-warm.a/b-0123abcd" },
		"warmnil": func(k *keptContainer) { k.Name = "kernelbox-warm.-0123abcd" },
		"token":   func(k *keptContainer) { k.Token = "x y" },
		"sockdir": func(k *keptContainer) { k.SockDir = "/etc/0123abcd" },
		"dotdot":  func(k *keptContainer) { k.SockDir = root + "/" + socketRootPrefix + "x/../../0123abcd" },
	}
	// A session that took a warm container is listed under the pool's name until
	// its rename (AdoptNow): that name, with the record's key, is the backend's.
	warmTaken := good
	warmTaken.ID, warmTaken.Name = strings.Repeat("c", 64), "kernelbox-warm.python-analyst-0123abcd"
	list := []keptContainer{good, warmTaken}
	for _, f := range bad {
		k := good
		k.ID = strings.Repeat("b", 64)
		f(&k)
		list = append(list, k)
	}
	kept, skipped, err := readKept(write(t, state(list...)), root, self)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[good.ID] != good || kept[warmTaken.ID] != warmTaken || len(skipped) != len(bad) {
		t.Fatalf("kept %v, skipped %v", kept, skipped)
	}
}

// TestReattach: a backend with the state file of one that detached takes its
// container back, with a server that answers; one removed by hand meanwhile
// comes back lost, with the reason.
func TestReattach(t *testing.T) {
	t.Parallel()
	opts := Options{SocketRoot: t.TempDir(), StateFile: filepath.Join(t.TempDir(), "docker.json")}
	b1, _ := newTestBackend(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := b1.Open(ctx, executor.SessionSpec{ID: "rt1", Dir: sessionDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	id := p.(*Placement).ContainerID()
	if err := b1.Detach(ctx); err != nil {
		t.Fatal(err)
	}

	b2, api := newTestBackend(t, opts)
	got, err := b2.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Session != "rt1" || got[0].Placement == nil {
		t.Fatalf("Reattach: %+v %v", got, err)
	}
	c, err := jupyter.NewClient(got[0].Placement.Server().Endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(ctx); err != nil {
		t.Fatalf("the adopted server does not answer: %v", err)
	}
	c.CloseIdle()
	if err := b2.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}

	b3, _ := newTestBackend(t, opts)
	got, err = b3.Reattach(ctx)
	if err != nil || len(got) != 1 || got[0].Placement != nil || !strings.Contains(got[0].Lost, "was removed while kernelbox was not running") {
		t.Fatalf("Reattach after a removal: %+v %v", got, err)
	}
}
