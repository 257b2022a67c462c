package docker

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// fakeAPI is a Docker daemon in memory for the failure paths a real daemon will not
// produce on demand. Methods the tests do not set fail loudly.
type fakeAPI struct {
	dockerAPI // nil: an unexpected call panics
	images    map[string]bool
	pingErr   error
	removeErr error
	listed    []container.Summary
	removed   []string
	closed    bool
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
