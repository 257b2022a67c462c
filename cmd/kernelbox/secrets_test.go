package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kernelbox/kernelbox/templates"
)

// SIGHUP re-reads a template's secrets: a file gone fails the reload (logged,
// with the rule and the source, never the value), a new file is read.
func TestSecretsReloadOnHUP(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("old-hup-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := templates.Parse(strings.NewReader(`{"templates": [{"name": "v",
	  "network": {"allow": ["api.example:443"]},
	  "secrets": [{"name": "k", "hosts": ["api.example"], "from_file": "`+key+`"}]}]}`), dir, templates.Caps{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&lockedBuf{mu: &mu, b: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	stop := reloadSecretsOnHUP(ts, log)
	defer stop()
	logged := func(s string) bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := strings.Contains(buf.String(), s)
			mu.Unlock()
			if ok {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	os.Remove(key)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	if !logged(`secrets reload failed; the template keeps its old values" template=v err="secrets \"k\": from_file: open`) {
		t.Fatalf("no failure logged: %s", buf.String())
	}
	os.WriteFile(key, []byte("new-hup-value\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	if !logged(`msg="secrets reloaded" template=v rules=1`) {
		t.Fatalf("no reload logged: %s", buf.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(buf.String(), "hup-value") {
		t.Fatalf("the log shows a value: %s", buf.String())
	}
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
