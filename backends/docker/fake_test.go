package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/executor"
)

// fakeAPI is a Docker daemon in memory for the failure paths a real daemon will not
// produce on demand. Methods the tests do not set fail loudly.
type fakeAPI struct {
	dockerAPI // nil: an unexpected call panics
	images    map[string]bool
	pingErr   error
	removeErr error
	createErr error // ContainerCreate's answer; nil: it creates "c1"
	startErr  error // ContainerStart's answer
	listed    []container.Summary
	removed   []string
	closed    bool
	runtimes  []string // Info's runtimes; nil: runc only
}

func (f *fakeAPI) Info(context.Context, client.InfoOptions) (client.SystemInfoResult, error) {
	rts := map[string]system.RuntimeWithStatus{}
	for _, n := range append([]string{"runc"}, f.runtimes...) {
		rts[n] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: n}}
	}
	return client.SystemInfoResult{Info: system.Info{Runtimes: rts, DefaultRuntime: "runc"}}, nil
}

func (f *fakeAPI) Ping(context.Context, client.PingOptions) (client.PingResult, error) {
	return client.PingResult{}, f.pingErr
}

func (f *fakeAPI) ImageInspect(_ context.Context, image string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	if !f.images[image] {
		return client.ImageInspectResult{}, cerrdefs.ErrNotFound.WithMessage("no such image: " + image)
	}
	return client.ImageInspectResult{}, nil
}

func (f *fakeAPI) ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error) {
	return client.ContainerListResult{Items: f.listed}, nil
}

func (f *fakeAPI) ContainerRemove(_ context.Context, id string, _ client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	f.removed = append(f.removed, id)
	return client.ContainerRemoveResult{}, f.removeErr
}

func (f *fakeAPI) ContainerCreate(context.Context, client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	if f.createErr != nil {
		return client.ContainerCreateResult{}, f.createErr
	}
	return client.ContainerCreateResult{ID: "c1"}, nil
}

func (f *fakeAPI) ContainerStart(context.Context, string, client.ContainerStartOptions) (client.ContainerStartResult, error) {
	return client.ContainerStartResult{}, f.startErr
}

func (f *fakeAPI) ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	return client.ContainerInspectResult{}, errors.New("fake: no inspect")
}

func (f *fakeAPI) ContainerLogs(context.Context, string, client.ContainerLogsOptions) (client.ContainerLogsResult, error) {
	return nil, errors.New("fake: no logs")
}

func (f *fakeAPI) Close() error { f.closed = true; return nil }

// newFakeBackend makes a backend on f with default options.
func newFakeBackend(t *testing.T, f *fakeAPI) *Backend {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	c, err := Options{SocketRoot: t.TempDir()}.resolve(os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBackend(context.Background(), c, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewFailsClearly(t *testing.T) {
	t.Parallel()
	c, err := Options{SocketRoot: t.TempDir()}.resolve(os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	_, err = newBackend(context.Background(), c, &fakeAPI{pingErr: errors.New("connection refused")})
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("New with the daemon down: %v", err)
	}
	_, err = newBackend(context.Background(), c, &fakeAPI{})
	if !errors.Is(err, ErrNoImage) {
		t.Errorf("New without the image: %v, want ErrNoImage", err)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{images: map[string]bool{DefaultImage: true}}
	b := newFakeBackend(t, f)
	if err := b.Health(context.Background()); err != nil {
		t.Errorf("Health = %v", err)
	}
	delete(f.images, DefaultImage)
	if err := b.Health(context.Background()); !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "kernelbox image build") {
		t.Errorf("Health without the image = %v", err)
	}
	f.pingErr = errors.New("connection refused")
	if err := b.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("Health with the daemon down = %v", err)
	}
}

func TestCloseJoinsErrorsAndFinishes(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{images: map[string]bool{DefaultImage: true}}
	b := newFakeBackend(t, f)
	sockDir := b.sockRoot + "/0123abcd"
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	b.track(&Placement{b: b, id: "tracked", sockDir: sockDir})
	f.listed = []container.Summary{{ID: "untracked"}}
	f.removeErr = errors.New("daemon busy")

	err := b.Close(context.Background())
	if err == nil || strings.Count(err.Error(), "daemon busy") != 2 {
		t.Fatalf("Close = %v, want both removal failures", err)
	}
	if strings.Join(f.removed, ",") != "tracked,untracked" {
		t.Errorf("removed %v", f.removed)
	}
	if _, err := os.Stat(b.sockRoot); !errors.Is(err, os.ErrNotExist) || !f.closed {
		t.Errorf("socket root left (%v) or client not closed (%v)", err, f.closed)
	}

	// A container that is already gone is not an error.
	f2 := &fakeAPI{images: map[string]bool{DefaultImage: true}, removeErr: cerrdefs.ErrNotFound}
	b2 := newFakeBackend(t, f2)
	b2.track(&Placement{b: b2, id: "gone", sockDir: b2.sockRoot + "/x"})
	if err := b2.Close(context.Background()); err != nil {
		t.Errorf("Close with the container already gone = %v", err)
	}
}

// An Open that fails part-way takes back what its earlier steps did: the socket
// directory, and the container once it was (or may have been) created.
func TestOpenUndo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		createErr   error
		startErr    error
		wantErr     error  // errors.Is target, or nil
		wantText    string // in the error
		wantRemoved string // prefix of the one container removed; "" for none
	}{
		{"no image", cerrdefs.ErrNotFound, nil, ErrNoImage, "", ""},
		{"create", errors.New("daemon busy"), nil, nil, "create container: daemon busy", "kernelbox-"},
		{"start", nil, errors.New("no cgroup"), nil, "start: no cgroup", "c1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeAPI{images: map[string]bool{DefaultImage: true}, createErr: tt.createErr, startErr: tt.startErr}
			b := newFakeBackend(t, f)
			_, err := b.Open(context.Background(), executor.SessionSpec{ID: "s", Dir: t.TempDir()})
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Open = %v, want %q in it", err, tt.wantText)
			}
			switch {
			case tt.wantRemoved == "" && len(f.removed) != 0:
				t.Errorf("removed %v, want none", f.removed)
			case tt.wantRemoved != "" && (len(f.removed) != 1 || !strings.HasPrefix(f.removed[0], tt.wantRemoved)):
				t.Errorf("removed %v, want one %s...", f.removed, tt.wantRemoved)
			}
			if left, err := os.ReadDir(b.sockRoot); err != nil || len(left) != 0 {
				t.Errorf("socket root holds %v (%v), want nothing", left, err)
			}
			b.mu.Lock()
			tracked := len(b.placements)
			b.mu.Unlock()
			if tracked != 0 {
				t.Errorf("%d placements still tracked", tracked)
			}
		})
	}
}
