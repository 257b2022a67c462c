package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/executor"
)

// TestTokenNotOnCommandLine runs a cell in a real container, then looks for the
// server's token in every host process's command line and in docker inspect.
func TestTokenNotOnCommandLine(t *testing.T) {
	b, api := newTestBackend(t, Options{})
	p := openPlacement(t, b, executor.SessionSpec{ID: "token", Dir: sessionDir(t)})
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	if got := k.run("print(6*7)"); got != "42\n" {
		t.Fatalf("cell printed %q", got)
	}
	tok := srv.Endpoint.Token
	if len(tok) < 32 {
		t.Fatalf("token %q too short to search for", tok)
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	seen := 0
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		seen++
		if strings.Contains(string(b), tok) {
			t.Errorf("%s holds the token: %q", f, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	insp, err := api.ContainerInspect(ctx, p.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := insp.Container.Config
	all := strings.Join(append(append(append([]string{}, c.Cmd...), c.Entrypoint...), c.Env...), " ") + " " +
		strings.Join(insp.Container.Args, " ") + " " + insp.Container.Path
	if strings.Contains(all, tok) {
		t.Errorf("docker inspect shows the token: %s", all)
	}
	t.Logf("searched %d command lines and the container's inspect for the token", seen)
}
