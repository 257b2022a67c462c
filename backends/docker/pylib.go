package docker

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// Shared Python libraries. On an engine whose storage driver is fuse-overlayfs,
// every open and stat of the image's files goes through a FUSE daemon: a session's
// Jupyter Server and kernel import about 1,200 modules as they start, and that
// daemon's share of it was about 0.8 s of CPU per kernel start (issue 53). So the
// image's Python libraries are copied once per image id into named volumes, which
// live on the daemon's own file system, and each session mounts them read-only
// over the same paths. The volumes are named after the image id, so a rebuilt
// image never runs with an older image's libraries; every session of one image
// shares them and none can write them.
//
// The copy runs in a container of the image (root, no capability, no network,
// read-only root), named after the image id: its name is the lock that keeps two
// kernelbox processes from filling the same volumes at once. It writes a marker in
// each volume when done, so that a fill cut short is done again, and a volume
// "<prefix>-done" records that the copy is complete. Sessions use the volumes only
// once this process has seen that record; until then (while the first fill runs,
// in the background) they read the image's own files as before.

// LabelPylib marks the volumes of the shared Python libraries; its value is the
// full id of the image they were copied from.
const LabelPylib = "io.kernelbox.pylib"

// pylibDirs are the image's Python libraries shared through volumes: Debian's
// dist-packages and the standard library of its Python.
var pylibDirs = []string{"/usr/lib/python3", "/usr/lib/python3.11"}

const (
	pylibPrefix   = "kernelbox-pylib-"
	pylibFillDir  = "/kernelbox-fill"
	pylibMarker   = ".kernelbox-complete"
	pylibNotThere = 3  // the fill's exit status when the image lacks one of pylibDirs
	pylibAgain    = -1 // runFill's status when the fill container went away under it
	pylibAttempts = 5
	pylibTimeout  = 10 * time.Minute // one fill of ~550 MB on a loaded host took 31 s
)

// pylibScript copies each directory named in its arguments to the volume mounted
// below pylibFillDir, unless that volume already has the marker of a finished copy.
const pylibScript = `set -eu
for d in "$@"; do [ -d "$d" ] || exit 3; done
for d in "$@"; do
  t=` + pylibFillDir + `/$(basename "$d")
  [ -e "$t/` + pylibMarker + `" ] && continue
  find "$t" -mindepth 1 -delete
  cp -a "$d/." "$t/"
  : > "$t/` + pylibMarker + `"
done`

// pylibState is what this process knows of one image id's volumes.
type pylibState int

const (
	pylibFilling pylibState = iota + 1 // a fill is under way (or failed: not retried)
	pylibReady                         // sessions mount the volumes
	pylibNone                          // the image has not the libraries: never mounted
)

// pylibs tracks the shared libraries of each image id this backend has run, and
// owns the goroutines that fill them. Safe for concurrent use.
type pylibs struct {
	mu     sync.Mutex
	state  map[string]pylibState // by full image id
	ctx    context.Context       // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newPylibs() *pylibs {
	ctx, cancel := context.WithCancel(context.Background())
	return &pylibs{state: map[string]pylibState{}, ctx: ctx, cancel: cancel}
}

// stop cancels the fills under way and waits for their goroutines. A fill
// container left running finishes on its own; the next process finds its result.
func (p *pylibs) stop() {
	p.mu.Lock() // pylibFor adds to wg only under mu and before the cancel
	p.cancel()
	p.mu.Unlock()
	p.wg.Wait()
}

// pylibVolume names the volume of image id that holds dir's copy ("done" for the
// record of a complete copy).
func pylibVolume(id, dir string) string {
	return pylibPrefix + shortImageID(id) + "-" + path.Base(dir)
}

// shortImageID is the first 12 hex digits of an image id ("sha256:..." or not).
func shortImageID(id string) string {
	_, hex, ok := strings.Cut(id, ":")
	if !ok {
		hex = id
	}
	return dockerapi.Short(hex)
}

// pylibMounts are a session's read-only mounts of image id's shared libraries.
func pylibMounts(id string) []mount.Mount {
	ms := make([]mount.Mount, 0, len(pylibDirs))
	for _, d := range pylibDirs {
		ms = append(ms, mount.Mount{
			Type: mount.TypeVolume, Source: pylibVolume(id, d), Target: d, ReadOnly: true,
			// Never copy the image's files in: the fill alone writes these volumes.
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		})
	}
	return ms
}

// sharedLibs decides whether the session mounts its image's shared libraries: when
// this process has seen them complete, it sets the image to create the container
// from by id (so that a retag between here and the create cannot pair another
// image with these libraries) and adds the mounts. Otherwise the session reads the
// image's own files.
func (b *Backend) sharedLibs(ctx context.Context, l *launch) {
	if id, ok := b.pylibFor(ctx, l.cfg.Image); ok {
		l.imageID, l.libs = id, pylibMounts(id)
	}
}

// pylibFor returns the id of image ref and whether its shared libraries are ready.
// The first time it meets an image id, it starts their fill in the background.
func (b *Backend) pylibFor(ctx context.Context, ref string) (string, bool) {
	if b.cfg.noSharedLibs {
		return "", false
	}
	r, err := b.api.ImageInspect(ctx, ref)
	if err != nil || r.ID == "" {
		return "", false // the create says what is wrong with the image
	}
	id, p := r.ID, b.pylib
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state[id]
	if st == 0 && p.ctx.Err() == nil {
		p.state[id] = pylibFilling
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			b.fillPylib(p.ctx, id, ref)
		}()
	}
	return id, st == pylibReady
}

// fillPylib makes image id's shared libraries ready, or finds them ready, and
// records the outcome; ref is the image's name, for the log.
func (b *Backend) fillPylib(ctx context.Context, id, ref string) {
	ctx, cancel := context.WithTimeout(ctx, pylibTimeout)
	defer cancel()
	log := b.cfg.log.With("image", ref, "image_id", shortImageID(id))
	t0 := time.Now()
	st, err := b.ensurePylib(ctx, id)
	b.pylib.mu.Lock()
	if err == nil {
		b.pylib.state[id] = st
	}
	b.pylib.mu.Unlock()
	switch {
	case err != nil:
		log.Warn("shared python libraries not made: sessions read the image's own files", "err", err)
	case st == pylibNone:
		log.Info("image has not the python libraries to share", "dirs", pylibDirs)
	default:
		log.Info("shared python libraries ready", "took", time.Since(t0).Round(time.Millisecond))
		b.removeStalePylibs(ctx, id)
	}
}

// ensurePylib returns pylibReady once image id's volumes hold a complete copy,
// filling them if no record says so, or pylibNone when the image lacks the
// libraries.
func (b *Backend) ensurePylib(ctx context.Context, id string) (pylibState, error) {
	name := pylibVolume(id, "fill")
	for range pylibAttempts {
		if ok, err := b.pylibDone(ctx, id); err != nil || ok {
			return pylibReady, err
		}
		code, err := b.runFill(ctx, id, name)
		if err != nil {
			return 0, err
		}
		switch code {
		case 0:
			_, err := b.api.VolumeCreate(ctx, client.VolumeCreateOptions{
				Name: pylibVolume(id, "done"), Labels: map[string]string{LabelPylib: id},
			})
			if err != nil {
				return 0, fmt.Errorf("record the shared libraries: %w", err)
			}
			return pylibReady, b.removeContainer(ctx, name)
		case pylibNotThere:
			return pylibNone, b.removeContainer(ctx, name)
		case pylibAgain:
			continue
		}
		b.cfg.log.Warn("filling the shared python libraries failed; again", "exit_code", code)
		if err := b.removeContainer(ctx, name); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("fill the shared python libraries: failed %d times", pylibAttempts)
}

// pylibDone reports whether the record of image id's complete copy exists, with
// the volumes it vouches for.
func (b *Backend) pylibDone(ctx context.Context, id string) (bool, error) {
	for _, d := range append([]string{"done"}, pylibDirs...) {
		_, err := b.api.VolumeInspect(ctx, pylibVolume(id, d), client.VolumeInspectOptions{})
		if dockerapi.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("inspect volume: %w", err)
		}
	}
	return true, nil
}

// runFill runs the fill container called name, or joins the one another process
// runs, and returns its exit status.
func (b *Backend) runFill(ctx context.Context, id, name string) (int64, error) {
	_, err := b.api.ContainerCreate(ctx, b.fillOptions(id, name))
	if err != nil && !dockerapi.IsConflict(err) {
		return 0, fmt.Errorf("create the fill container: %w", err)
	}
	r, err := b.api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if dockerapi.IsNotFound(err) {
		// Another process's, still being created, or removed since: look again.
		return pylibAgain, sleepCtx(ctx, 200*time.Millisecond)
	}
	if err != nil {
		return 0, fmt.Errorf("inspect the fill container: %w", err)
	}
	if r.Container.State != nil && r.Container.State.Status == container.StateCreated {
		// Ours, or another process's that died before starting it; starting one
		// that runs already does nothing.
		_, err := b.api.ContainerStart(ctx, name, client.ContainerStartOptions{})
		if dockerapi.IsNotFound(err) {
			return pylibAgain, nil
		}
		if err != nil {
			return 0, fmt.Errorf("start the fill container: %w", err)
		}
	}
	w := b.api.ContainerWait(ctx, name, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case res := <-w.Result:
		if res.Error != nil {
			return 0, fmt.Errorf("wait for the fill container: %s", res.Error.Message)
		}
		return res.StatusCode, nil
	case err := <-w.Error:
		if dockerapi.IsNotFound(err) {
			return pylibAgain, nil
		}
		return 0, fmt.Errorf("wait for the fill container: %w", err)
	}
}

// fillOptions is the fill container of image id: the image's own files copied by
// root with no capability (the files are root's), no network, a read-only root
// and the backend's runtime, into the volumes mounted read-write below
// pylibFillDir.
func (b *Backend) fillOptions(id, name string) client.ContainerCreateOptions {
	var mounts []mount.Mount
	for _, d := range pylibDirs {
		mounts = append(mounts, mount.Mount{
			Type: mount.TypeVolume, Source: pylibVolume(id, d), Target: path.Join(pylibFillDir, path.Base(d)),
			VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: map[string]string{LabelPylib: id}},
		})
	}
	pids := int64(64)
	return client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: id, User: "0:0", Labels: map[string]string{LabelPylib: id},
			Entrypoint: append([]string{"sh", "-c", pylibScript, "sh"}, pylibDirs...),
			WorkingDir: "/",
		},
		HostConfig: &container.HostConfig{
			CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges:true"},
			ReadonlyRootfs: true, NetworkMode: "none", Runtime: b.cfg.runtime, Mounts: mounts,
			Resources: container.Resources{Memory: 512 << 20, PidsLimit: &pids},
		},
	}
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// removeStalePylibs removes the shared libraries of images that no longer exist
// (a rebuilt image's predecessor, once removed or pruned); keep is the image id
// just made ready. A volume a container still uses is left for a later pass.
func (b *Backend) removeStalePylibs(ctx context.Context, keep string) {
	list, err := b.api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelPylib)})
	if err != nil {
		b.cfg.log.Debug("list shared python libraries", "err", err)
		return
	}
	gone := map[string]bool{}
	for _, v := range list.Items {
		id := v.Labels[LabelPylib]
		if id == keep || !strings.HasPrefix(v.Name, pylibPrefix+shortImageID(id)+"-") {
			continue
		}
		if _, ok := gone[id]; !ok {
			_, err := b.api.ImageInspect(ctx, id)
			gone[id] = dockerapi.IsNotFound(err)
		}
		if !gone[id] {
			continue
		}
		_, err := b.api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{})
		if err != nil && !dockerapi.IsNotFound(err) {
			b.cfg.log.Debug("shared python libraries of a removed image kept", "volume", v.Name, "err", err)
			continue
		}
		b.cfg.log.Info("removed the shared python libraries of a removed image", "volume", v.Name)
	}
}
