// Package runtimefile keeps the token of a running `kernelbox serve` where only
// the same user can read it, as Jupyter's runtime files do: one 0600 JSON file per
// listen URL in a 0700 per-user directory. Start reading at [Write] and [Lookup].
package runtimefile

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Info is the content of a runtime file.
type Info struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// Dir returns the per-user runtime directory: $XDG_RUNTIME_DIR/kernelbox, else
// ~/.local/share/kernelbox/runtime.
func Dir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "kernelbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("runtime dir: %w", err)
	}
	return filepath.Join(home, ".local", "share", "kernelbox", "runtime"), nil
}

// NewToken returns 32 random bytes, hex-encoded.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Normalize returns the key a URL is filed under: scheme://host:port, with
// "localhost" and "127.0.0.1" kept apart (a client names the URL it was given).
func Normalize(url string) string {
	return strings.TrimSuffix(strings.TrimSpace(url), "/")
}

func fileFor(dir, url string) string {
	sum := sha256.Sum256([]byte(Normalize(url)))
	return filepath.Join(dir, "server-"+hex.EncodeToString(sum[:8])+".json")
}

// Write records info for each of urls (the names a client may use for one
// listener) and returns a function removing the files again. The directory is
// created 0700 and must be owned by the current user with no group or other access.
func Write(info Info, urls ...string) (remove func(), err error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runtime dir: %w", err)
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	var paths []string
	remove = func() {
		for _, p := range paths {
			_ = os.Remove(p)
		}
	}
	for _, u := range urls {
		i := info
		i.URL = Normalize(u)
		b, _ := json.Marshal(i)
		p := fileFor(dir, u)
		tmp := p + ".tmp"
		_ = os.Remove(tmp)
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			remove()
			return nil, fmt.Errorf("runtime file: %w", err)
		}
		_, werr := f.Write(b)
		if err := errors.Join(werr, f.Close(), os.Rename(tmp, p)); err != nil {
			_ = os.Remove(tmp)
			remove()
			return nil, fmt.Errorf("runtime file: %w", err)
		}
		paths = append(paths, p)
	}
	return remove, nil
}

// checkDir refuses a runtime directory another user owns or can enter.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("runtime dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || (ok && int(st.Uid) != os.Getuid()) || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("runtime dir %s must be a directory owned by uid %d with mode 0700", dir, os.Getuid())
	}
	return nil
}

// Lookup returns the token of the live server recorded for url, or "" when there
// is none (no file, another user's file, or a dead server's, which it removes).
func Lookup(url string) string {
	dir, err := Dir()
	if err != nil || checkDir(dir) != nil {
		return ""
	}
	p := fileFor(dir, url)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		return ""
	}
	var info Info
	if json.NewDecoder(f).Decode(&info) != nil || info.URL != Normalize(url) {
		return ""
	}
	if info.PID > 0 && syscall.Kill(info.PID, 0) == syscall.ESRCH {
		_ = os.Remove(p)
		return ""
	}
	return info.Token
}
