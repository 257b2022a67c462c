package docker

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/executor"
)

// waitPylib waits until b's shared libraries of image ref are ready and returns the
// image's id. The first fill of an image copies ~550 MB (about a minute on a
// loaded host).
func waitPylib(t testing.TB, b *Backend, ref string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		id, ok := b.pylibFor(context.Background(), ref)
		if ok {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("shared libraries of %s (%q) not ready after 5 minutes", ref, id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSharedLibsReadOnly: once an image's shared libraries are ready, a session's
// container is created from the image by id, mounts them read-only over the
// image's paths, imports from them, and its kernel cannot write them.
func TestSharedLibsReadOnly(t *testing.T) {
	b, api := newTestBackend(t, Options{})
	id := waitPylib(t, b, DefaultImage)
	p := openPlacement(t, b, executor.SessionSpec{ID: "pylib", Dir: sessionDir(t)})
	r, err := api.ContainerInspect(context.Background(), p.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Container.Config.Image != id {
		t.Errorf("container image = %q, want the image by id %q", r.Container.Config.Image, id)
	}
	for _, d := range pylibDirs {
		var found bool
		for _, m := range r.Container.Mounts {
			if m.Destination == d {
				found = true
				if m.Type != mount.TypeVolume || m.Name != pylibVolume(id, d) || m.RW {
					t.Errorf("mount at %s = %+v, want volume %s read-only", d, m, pylibVolume(id, d))
				}
			}
		}
		if !found {
			t.Errorf("no mount at %s", d)
		}
	}
	srv := p.Server()
	k := dialKernel(t, srv, startKernel(t, srv))
	got := k.run(`import os, json, pandas
mounts = {l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo")}
print(mounts.get("/usr/lib/python3", "-")[:2], mounts.get("/usr/lib/python3.11", "-")[:2])
for p in ["/usr/lib/python3/dist-packages/pandas/__init__.py", "/usr/lib/python3.11/json/__init__.py",
          "/usr/lib/python3.11/kernelbox_evil.py", "/usr/lib/python3/dist-packages/kernelbox_evil.pth",
          "/usr/lib/python3/` + pylibMarker + `"]:
    try:
        open(p, "a").write("#")
        print("WROTE", p)
    except OSError as e:
        print(e.errno)
for f in (os.remove, lambda p: os.rename(p, p + ".x")):
    try:
        f("/usr/lib/python3/` + pylibMarker + `")
        print("CHANGED")
    except OSError as e:
        print(e.errno)
`)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if lines[0] != "ro ro" {
		t.Errorf("mount options of the shared libraries in the kernel = %q, want ro ro", lines[0])
	}
	if strings.Contains(got, "WROTE") || strings.Contains(got, "CHANGED") {
		t.Errorf("the kernel changed the shared libraries:\n%s", got)
	}
}

// TestSharedLibsPerImage: another image id gets its own volumes, labelled with its
// id, and they are removed once that image is gone.
func TestSharedLibsPerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the image's libraries again: about a minute")
	}
	requireDocker(t)
	tag := "kernelbox-test-pylib:" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	build := exec.Command("docker", "build", "-q", "-t", tag, "-")
	build.Stdin = strings.NewReader("FROM " + DefaultImage + "\nLABEL io.kernelbox.test=" + time.Now().Format(time.RFC3339Nano) + "\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	base, _ := newTestBackend(t, Options{})
	b, api := newTestBackend(t, Options{Image: tag})
	baseID, id := waitPylib(t, base, DefaultImage), waitPylib(t, b, tag)
	if id == baseID || pylibVolume(id, pylibDirs[0]) == pylibVolume(baseID, pylibDirs[0]) {
		t.Fatalf("a second image shares the first's volumes: %s, %s", id, baseID)
	}
	ctx := context.Background()
	names := func() []string {
		list, err := api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelPylib+"="+id)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range list.Items {
			out = append(out, v.Name)
		}
		return out
	}
	if got := names(); len(got) != len(pylibDirs)+1 {
		t.Errorf("volumes of image %s: %v, want %d", id, got, len(pylibDirs)+1)
	}
	if out, err := exec.Command("docker", "rmi", "-f", tag).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v\n%s", err, out)
	}
	base.removeStalePylibs(ctx, baseID)
	if got := names(); len(got) != 0 {
		t.Errorf("volumes of the removed image %s left: %v", id, got)
	}
	if _, ok := base.pylibFor(ctx, DefaultImage); !ok {
		t.Errorf("the default image's shared libraries are no longer ready")
	}
}
