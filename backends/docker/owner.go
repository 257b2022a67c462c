package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
	"github.com/kernelbox/kernelbox/backends/internal/sandbox"
)

// Labels set on every container the backend creates (see sandbox.Labels).
// LabelOwner, LabelBoot and LabelHost identify the creating process well enough
// that a later process can tell whether it is gone (see reap); LabelInstance tells
// one Backend's containers from another's in the same process. LabelSession is the
// session a container was created for: a warm pool's container keeps its pool
// placeholder after a session takes it (Docker cannot change labels); its name
// follows the session (adopt.go).
const (
	LabelCreatedBy = sandbox.LabelCreatedBy // always "kernelbox"
	LabelSession   = sandbox.LabelSession   // the session id it was created for (or a warm pool's placeholder)
	LabelInstance  = sandbox.LabelInstance  // the creating Backend's uuid
	LabelOwner     = sandbox.LabelOwner     // "<pid>:<start time>" of the creating process
	LabelBoot      = sandbox.LabelBoot      // the creating host's boot id
	LabelHost      = sandbox.LabelHost      // the creating host's name
)

// owner identifies a process across PID reuse: the pid together with its start time
// (field 22 of /proc/<pid>/stat, clock ticks since boot) on one boot of one host.
type owner struct {
	host  string
	boot  string
	pid   int
	start string
}

// currentOwner identifies this process. It needs Linux's /proc.
func currentOwner() (owner, error) {
	host, err := os.Hostname()
	if err != nil {
		return owner{}, fmt.Errorf("hostname: %w", err)
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return owner{}, fmt.Errorf("boot id: %w", err)
	}
	pid := os.Getpid()
	start, _, err := procStart(pid)
	if err != nil {
		return owner{}, err
	}
	return owner{host: host, boot: strings.TrimSpace(string(boot)), pid: pid, start: start}, nil
}

// labels returns o as container labels.
func (o owner) labels() map[string]string {
	return map[string]string{
		LabelOwner: strconv.Itoa(o.pid) + ":" + o.start,
		LabelBoot:  o.boot,
		LabelHost:  o.host,
	}
}

// ownerFromLabels reads an owner back from container labels.
func ownerFromLabels(l map[string]string) (owner, error) {
	pidStr, start, ok := strings.Cut(l[LabelOwner], ":")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 || start == "" || l[LabelBoot] == "" || l[LabelHost] == "" {
		return owner{}, fmt.Errorf("owner labels %s=%q %s=%q %s=%q are incomplete",
			LabelOwner, l[LabelOwner], LabelBoot, l[LabelBoot], LabelHost, l[LabelHost])
	}
	return owner{host: l[LabelHost], boot: l[LabelBoot], pid: pid, start: start}, nil
}

// procStart returns the start time and state (field 3) of process pid. The error
// wraps fs.ErrNotExist when there is no such process.
func procStart(pid int) (start, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", fmt.Errorf("process %d: %w", pid, err)
	}
	return parseStat(b)
}

// parseStat extracts the state (field 3) and start time (field 22) from the contents
// of /proc/<pid>/stat. The command name (field 2) is in parentheses and may itself
// contain spaces and parentheses, so fields are counted after the last ')'.
func parseStat(b []byte) (start, state string, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", "", errors.New("malformed /proc stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	const startIdx = 22 - 3 // f[0] is field 3
	if len(f) <= startIdx {
		return "", "", fmt.Errorf("malformed /proc stat: %d fields after the command", len(f))
	}
	return f[startIdx], f[0], nil
}

// judge decides whether the process that created a container (o) is gone, as seen
// by self. It answers false when it cannot tell, for example for a container made on
// another host that shares the daemon: a live session must never be reaped by
// mistake. procStart is a parameter so that tests can fake processes.
func judge(o, self owner, procStart func(pid int) (start, state string, err error)) (gone bool, why string) {
	if o.host != self.host {
		return false, fmt.Sprintf("created on host %q", o.host)
	}
	if o.boot != self.boot {
		return true, "created before the host's last boot"
	}
	start, state, err := procStart(o.pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, fmt.Sprintf("process %d has exited", o.pid)
	case err != nil:
		return false, err.Error()
	case start != o.start:
		return true, fmt.Sprintf("process %d has exited and its pid was reused", o.pid)
	case state == "Z" || state == "X":
		return true, fmt.Sprintf("process %d has exited (zombie)", o.pid)
	}
	return false, fmt.Sprintf("process %d is alive", o.pid)
}

// reap removes containers created by kernelbox processes that are gone, and their
// socket directories, and returns how many containers it removed. A container whose
// owner cannot be judged is left alone; it stops itself at its max lifetime.
func (b *Backend) reap(ctx context.Context) (int, error) {
	list, err := b.api.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelCreatedBy+"="+sandbox.CreatedBy),
	})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	var (
		n     int
		errs  []error
		files = map[string]map[string]bool{}
		kept  = b.kept.Peek()
	)
	for _, c := range list.Items {
		if c.Labels[LabelInstance] == b.instance {
			continue
		}
		if _, ok := kept[c.ID]; ok {
			continue // Reattach takes it back, or removes it
		}
		log := b.cfg.log.With("container", dockerapi.Short(c.ID), "session", c.Labels[LabelSession])
		o, err := ownerFromLabels(c.Labels)
		if err != nil {
			log.Warn("not reaping container with unreadable owner", "err", err)
			continue
		}
		gone, why := judge(o, b.owner, procStart)
		if !gone {
			log.Debug("not reaping container", "reason", why)
			continue
		}
		if keptElsewhere(c.ID, socketDirOf(c.Mounts), files) {
			log.Debug("not reaping container: a state file keeps it for the next start of its server")
			continue
		}
		_, err = b.api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !dockerapi.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove orphaned container %s: %w", dockerapi.Short(c.ID), err))
			continue
		}
		removeOrphanSocketDir(c.Mounts)
		log.Info("reaped orphaned container", "reason", why, "state", c.State)
		n++
	}
	return n, errors.Join(errs...)
}

// socketDirOf returns the host directory mounted at the container's state
// directory, or "".
func socketDirOf(mounts []container.MountPoint) string {
	for _, m := range mounts {
		if m.Destination == containerSocketDir && filepath.IsAbs(m.Source) {
			return filepath.Clean(m.Source)
		}
	}
	return ""
}

// removeOrphanSocketDir removes the socket directory of a reaped container, and its
// parent when that is left empty, but only where it has the shape the backend gives
// it (<root>/kernelbox-sock-*/<name>), so that a hand-made label cannot steer this
// into deleting anything else.
func removeOrphanSocketDir(mounts []container.MountPoint) {
	for _, m := range mounts {
		if m.Destination != containerSocketDir || !filepath.IsAbs(m.Source) {
			continue
		}
		dir := filepath.Clean(m.Source)
		parent := filepath.Dir(dir)
		if !strings.HasPrefix(filepath.Base(parent), socketRootPrefix) || !isContainerKey(filepath.Base(dir)) {
			continue
		}
		_ = os.RemoveAll(dir)
		_ = os.Remove(parent) // only succeeds once the backend's last socket dir is gone
	}
}
