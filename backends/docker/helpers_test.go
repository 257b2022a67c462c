package docker

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// requireDocker returns a client for the test's Docker daemon. It skips the test when
// the daemon or the kernel image is missing, unless KERNELBOX_REQUIRE_DOCKER=1 is set,
// in which case it fails it: CI must not pass by skipping.
func requireDocker(t testing.TB) *client.Client {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("KERNELBOX_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker required (KERNELBOX_REQUIRE_DOCKER=1): "+format, args...)
		}
		t.Skipf("docker unavailable: "+format, args...)
	}
	c, err := dockerapi.NewClient("")
	if err != nil {
		unavailable("%v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		unavailable("ping: %v", err)
	}
	ok, err := imageExists(ctx, c, DefaultImage)
	if err != nil {
		unavailable("%v", err)
	}
	if !ok {
		unavailable("%v", noImageError(DefaultImage))
	}
	return c
}

// testLogger logs through t.Log, so that the backend's logs show with the test's.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// logWriter adapts testing.TB to io.Writer.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestBackend makes a backend on the real daemon and closes it when the test ends,
// checking that it leaves none of its containers behind.
func newTestBackend(t testing.TB, opts Options) (*Backend, *client.Client) {
	t.Helper()
	api := requireDocker(t)
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := New(ctx, opts)
	t.Cleanup(func() {
		if b == nil {
			return
		}
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("close backend: %v", err)
		}
		if n := countContainers(t, api, LabelInstance+"="+b.instance); n != 0 {
			t.Errorf("%d containers left behind by backend %s", n, b.instance)
		}
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, api
}

// countContainers asks the daemon how many containers, running or not, carry label
// ("key=value").
func countContainers(t testing.TB, api *client.Client, label string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := api.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", label),
	})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return len(list.Items)
}

// sessionDir makes an empty session directory with inputs/ and outputs/.
func sessionDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"inputs", "outputs"} {
		if err := os.Mkdir(dir+"/"+sub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
