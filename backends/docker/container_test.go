package docker

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/kernelbox/kernelbox/backends/internal/sandbox/sandboxtest"
	"github.com/kernelbox/kernelbox/executor"
)

func TestCreateOptions(t *testing.T) {
	t.Parallel()
	c, err := Options{MaxLifetime: 90*time.Minute + 500*time.Millisecond, Env: []string{"HOME=/tmp/home"}}.resolve(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := createOptions(c, map[string]string{LabelCreatedBy: "kernelbox"}, containerSpec{
		name: "kernelbox-0123abcd", session: "s1", dir: "/srv/sess", sockDir: "/tmp/kernelbox-sock-1/0123abcd",
		data: []executor.DataMount{{Name: "ref", HostDir: "/data/ref"}},
	})
	cfg, hc := o.Config, o.HostConfig

	cmd := strings.Join(cfg.Entrypoint, " ")
	for _, want := range []string{
		"timeout -k 10 5401 python3 -Xfrozen_modules=off /run/kernelbox/kernelbox_server.py ",
		"--ServerApp.sock=/tmp/.kernelbox-server.sock",
		"--ServerApp.root_dir=/workspace",
	} {
		if !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %q", cmd, want)
		}
	}
	if strings.Contains(cmd, "token") || strings.Contains(strings.Join(cfg.Env, " "), "token=") {
		t.Errorf("command %q or env %q carries the token", cmd, cfg.Env)
	}
	if !slices.Contains(cfg.Env, "JUPYTER_CONFIG_DIR=/run/kernelbox/config") {
		t.Errorf("env %q: JUPYTER_CONFIG_DIR is not the read-only config dir", cfg.Env)
	}
	if strings.Contains(cmd, "--allow-root") {
		t.Errorf("command %q allows root", cmd)
	}
	if cfg.User != "1000:1000" || cfg.WorkingDir != "/workspace" || cfg.Image != DefaultImage || o.Name != "kernelbox-0123abcd" {
		t.Errorf("config = %+v", cfg)
	}
	if cfg.Labels[LabelSession] != "s1" || cfg.Labels[LabelCreatedBy] != "kernelbox" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	// Options.Env comes last, so it wins.
	if i, j := slices.Index(cfg.Env, "HOME=/tmp"), slices.Index(cfg.Env, "HOME=/tmp/home"); i < 0 || j < i {
		t.Errorf("env = %v", cfg.Env)
	}

	wantMounts := []mount.Mount{
		{Type: mount.TypeBind, Source: "/srv/sess", Target: "/workspace"},
		{Type: mount.TypeBind, Source: "/tmp/kernelbox-sock-1/0123abcd", Target: "/run/kernelbox", ReadOnly: true},
		{Type: mount.TypeBind, Source: "/data/ref", Target: "/workspace/data/ref", ReadOnly: true},
	}
	if !slices.EqualFunc(hc.Mounts, wantMounts, func(a, b mount.Mount) bool {
		return a.Type == b.Type && a.Source == b.Source && a.Target == b.Target && a.ReadOnly == b.ReadOnly
	}) {
		t.Errorf("mounts = %+v, want %+v", hc.Mounts, wantMounts)
	}
	if hc.NetworkMode != "none" || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !hc.ReadonlyRootfs ||
		hc.Init == nil || !*hc.Init || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges:true"}) {
		t.Errorf("hardening = %+v", hc)
	}
	if hc.Memory != 2<<30 || hc.MemorySwap != 2<<30 || hc.NanoCPUs != 2e9 || *hc.PidsLimit != 512 {
		t.Errorf("resources = %+v", hc.Resources)
	}
	if hc.Tmpfs["/tmp"] != "rw,exec,nosuid,nodev,mode=1777,size=536870912" {
		t.Errorf("tmpfs = %q", hc.Tmpfs["/tmp"])
	}
}

func TestCreateOptionsRelaxed(t *testing.T) {
	t.Parallel()
	c, err := Options{
		Memory: -1, PidsLimit: -1, TmpSize: -1, CPUs: -1, Network: "bridge", CapAdd: []string{"NET_RAW"},
		AllowNewPrivileges: true, WritableRootFS: true, NoInit: true, Runtime: "runsc", User: "1500:1500",
	}.resolve(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	hc := createOptions(c, nil, containerSpec{}).HostConfig
	if hc.Memory != 0 || hc.MemorySwap != 0 || hc.NanoCPUs != 0 || *hc.PidsLimit != -1 {
		t.Errorf("resources = %+v", hc.Resources)
	}
	if hc.NetworkMode != "bridge" || hc.ReadonlyRootfs || *hc.Init || hc.SecurityOpt != nil || hc.Runtime != "runsc" ||
		!slices.Equal(hc.CapAdd, []string{"NET_RAW"}) || hc.Tmpfs["/tmp"] != "rw,exec,nosuid,nodev,mode=1777" {
		t.Errorf("host config = %+v", hc)
	}
}

// The create request carries its config's sandbox.Spec hardening unchanged, as
// the swarm backend's service does (sandbox's TestContainerAndTaskHarden holds the
// two translations to the same hardening).
func TestCreateOptionsKeepsSandbox(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Memory: -1, PidsLimit: -1, TmpSize: -1, CPUs: -1, CapAdd: []string{"NET_RAW"}, AllowNewPrivileges: true,
			WritableRootFS: true, NoInit: true, User: "1500:1500", Env: []string{"A=1"}},
	} {
		c, err := o.resolve(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{LabelCreatedBy: "kernelbox", LabelInstance: "i1"}
		opts := createOptions(c, labels, containerSpec{name: "kernelbox-1", session: "s1", dir: "/srv/s", sockDir: "/run/k/1"})
		labels[LabelSession] = "s1"
		want := sandboxtest.OfContainer(c.Container(server, labels))
		if got := sandboxtest.OfContainer(opts.Config, opts.HostConfig); !reflect.DeepEqual(got, want) {
			t.Errorf("create request's hardening:\n%+v\nwant the sandbox's\n%+v", got, want)
		}
	}
}

// TestCreateOptionsSharedLibs: with an image's shared libraries, the container is
// created from the image by id and mounts each volume read-only, without the
// daemon's copy of the image's files into it, over the image's own directory.
func TestCreateOptionsSharedLibs(t *testing.T) {
	t.Parallel()
	c, err := Options{}.resolve(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const id = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	o := createOptions(c, nil, containerSpec{name: "kernelbox-1", session: "s1", dir: "/srv/s", sockDir: "/run/k/1",
		imageID: id, libs: pylibMounts(id)})
	if o.Config.Image != id {
		t.Errorf("image = %q, want %q", o.Config.Image, id)
	}
	for _, d := range pylibDirs {
		i := slices.IndexFunc(o.HostConfig.Mounts, func(m mount.Mount) bool { return m.Target == d })
		if i < 0 {
			t.Errorf("no mount at %s", d)
			continue
		}
		m := o.HostConfig.Mounts[i]
		want := "kernelbox-pylib-0123456789ab-" + d[strings.LastIndex(d, "/")+1:]
		if m.Type != mount.TypeVolume || m.Source != want || !m.ReadOnly || m.VolumeOptions == nil || !m.VolumeOptions.NoCopy {
			t.Errorf("mount at %s = %+v, want volume %s read-only, no copy", d, m, want)
		}
	}
	if o := createOptions(c, nil, containerSpec{name: "kernelbox-1", session: "s1", dir: "/srv/s", sockDir: "/run/k/1"}); o.Config.Image != DefaultImage {
		t.Errorf("without shared libraries, image = %q, want %q", o.Config.Image, DefaultImage)
	}
}
