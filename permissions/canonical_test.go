package permissions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	work := filepath.Join(root, "work")
	outside := filepath.Join(root, "outside")
	writeFile(t, filepath.Join(work, "a.csv"))
	writeFile(t, filepath.Join(work, "sub", "b.csv"))
	writeFile(t, filepath.Join(work, "allowed", "c.csv"))
	writeFile(t, filepath.Join(outside, "secret.txt"))
	writeFile(t, filepath.Join(outside, "deep", "x"))
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(work, "link"))
	symlink(t, "link", filepath.Join(work, "link2"))                              // link to a link, relative
	symlink(t, filepath.Join(work, "link2"), filepath.Join(work, "sub", "link3")) // and one more
	symlink(t, filepath.Join(root, "missing"), filepath.Join(work, "dangling"))
	symlink(t, "loop2", filepath.Join(work, "loop1"))
	symlink(t, "loop1", filepath.Join(work, "loop2"))
	symlink(t, filepath.Join(outside, "deep"), filepath.Join(work, "dirlink"))

	tests := []struct {
		name    string
		path    string
		workdir string
		want    string
		wantErr string
	}{
		{name: "absolute", path: filepath.Join(work, "a.csv"), want: filepath.Join(work, "a.csv")},
		{name: "relative", path: "a.csv", workdir: work, want: filepath.Join(work, "a.csv")},
		{name: "dot relative", path: "./sub/b.csv", workdir: work, want: filepath.Join(work, "sub", "b.csv")},
		{name: "unclean", path: work + "//sub/./b.csv", want: filepath.Join(work, "sub", "b.csv")},
		{name: "dotdot inside", path: "sub/../a.csv", workdir: work, want: filepath.Join(work, "a.csv")},
		{name: "dotdot escape", path: "allowed/../../outside/secret.txt", workdir: work, want: filepath.Join(outside, "secret.txt")},
		{name: "dotdot to etc", path: "allowed/" + strings.Repeat("../", 40) + "etc/passwd", workdir: work, want: "/etc/passwd"},
		{name: "directory", path: "sub", workdir: work, want: filepath.Join(work, "sub")},
		{name: "symlink escape", path: "link", workdir: work, want: filepath.Join(outside, "secret.txt")},
		{name: "link to link", path: "link2", workdir: work, want: filepath.Join(outside, "secret.txt")},
		{name: "chain of links", path: filepath.Join(work, "sub", "link3"), want: filepath.Join(outside, "secret.txt")},
		// ".." after a link applies to the link's target, as the kernel does.
		{name: "dotdot after dir link", path: "dirlink/../secret.txt", workdir: work, want: filepath.Join(outside, "secret.txt")},
		{name: "missing", path: "nope.csv", workdir: work, wantErr: "cannot resolve path: no such file or directory"},
		{name: "dangling link", path: "dangling", workdir: work, wantErr: "cannot resolve path: no such file or directory"},
		{name: "link loop", path: "loop1", workdir: work, wantErr: "cannot resolve path:"},
		{name: "file as dir", path: "a.csv/", workdir: work, wantErr: "cannot resolve path: not a directory"},
		{name: "empty", path: "", workdir: work, wantErr: "cannot resolve path: empty path"},
		{name: "NUL byte", path: "a.csv\x00.txt", workdir: work, wantErr: "NUL byte"},
		{name: "relative without workdir", path: "a.csv", wantErr: "no workdir"},
		{name: "relative workdir", path: "a.csv", workdir: "work", wantErr: "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonical(tt.path, tt.workdir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Canonical(%q, %q) = %q, %v; want error containing %q", tt.path, tt.workdir, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Canonical(%q, %q) = %q, %v; want %q", tt.path, tt.workdir, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalPermissionDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root can search any directory")
	}
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "locked", "f"))
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "locked"), 0o755) })
	_, err := Canonical(filepath.Join(root, "locked", "f"), "")
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Canonical = %v, want permission denied", err)
	}
}

func TestResolveExisting(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "real", "f"))
	symlink(t, filepath.Join(root, "real"), filepath.Join(root, "link"))
	tests := []struct {
		name, in, want string
	}{
		{"existing", filepath.Join(root, "link", "f"), filepath.Join(root, "real", "f")},
		{"missing leaf", filepath.Join(root, "link", "nope"), filepath.Join(root, "real", "nope")},
		{"missing dirs", filepath.Join(root, "link", "a", "b"), filepath.Join(root, "real", "a", "b")},
		{"nothing exists", "/nonexistent-kernelbox/a", "/nonexistent-kernelbox/a"},
		{"root", "/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := resolveExisting(tt.in); got != tt.want {
				t.Errorf("resolveExisting(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// referenceResolveExisting is resolveExisting as first written: one EvalSymlinks per
// path, falling back to the parent.
func referenceResolveExisting(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Dir(p), filepath.Base(p)
	if dir == p {
		return p
	}
	return filepath.Join(referenceResolveExisting(dir), base)
}

// pathResolver walks a path once per element and remembers what it saw; its answers
// must be those of one EvalSymlinks per path, whatever the links.
func TestPathResolverMatchesEvalSymlinks(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "real", "f"))
	writeFile(t, filepath.Join(root, "real", "sub", "g"))
	symlink(t, filepath.Join(root, "real"), filepath.Join(root, "abs"))
	symlink(t, "real", filepath.Join(root, "rel"))
	symlink(t, "../real/sub", filepath.Join(root, "real", "up"))
	symlink(t, "abs", filepath.Join(root, "chain"))
	symlink(t, filepath.Join(root, "missing"), filepath.Join(root, "dangling"))
	symlink(t, "loop2", filepath.Join(root, "loop1"))
	symlink(t, "loop1", filepath.Join(root, "loop2"))
	symlink(t, filepath.Join(root, "real", "f"), filepath.Join(root, "filelink"))
	var paths []string
	for _, first := range []string{"real", "abs", "rel", "chain", "dangling", "loop1", "filelink", "missing"} {
		for _, rest := range []string{"", "f", "sub", "sub/g", "up", "up/g", "up/nope/x", "nope", "nope/x", "f/x"} {
			paths = append(paths, filepath.Join(root, first, rest))
		}
	}
	paths = append(paths, "/", "/nonexistent-kernelbox/a", root)
	shared := pathResolver{}
	for _, p := range paths {
		want := referenceResolveExisting(p)
		if got := resolveExisting(p); got != want {
			t.Errorf("resolveExisting(%q) = %q, want %q", p, got, want)
		}
		if got := shared.resolve(p); got != want {
			t.Errorf("shared resolver: resolve(%q) = %q, want %q", p, got, want)
		}
	}
}
