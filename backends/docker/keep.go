package docker

// Keeping containers across a restart of kernelbox (issue 34 item 1). With
// Options.StateFile set, the backend keeps, in that file, what reaching each
// session's container again takes: its id, name, session, state directory and
// server token, and the identity (device, inode) of the server's socket it
// pinned. The file is rewritten whole (temporary file, fsync, rename, 0600) each
// time a container becomes ready, changes session or is removed, so that a
// SIGKILL at any moment leaves either the old list or the new one. The next
// backend with the same StateFile reads it in New: the containers it lists are
// not reaped; reattach.go takes them back. Each socket root holds a marker file
// naming the state file, so that another kernelbox process (another workspace)
// does not reap a container that a state file still lists.

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/internal/statefile"
)

// keptVersion is the state file's format version; another version is refused.
const keptVersion = 1

// keptMarker is the file in a socket root that names the state file listing its
// containers.
const keptMarker = ".state-file"

// keptState is the state file.
type keptState struct {
	Version int    `json:"version"`
	Host    string `json:"host"`
	Boot    string `json:"boot"`
	// Pid and Start identify the process that wrote the file (see owner): a
	// process still running holds the containers, which another must not take.
	Pid        int             `json:"pid"`
	Start      string          `json:"start"`
	Containers []keptContainer `json:"containers"`
}

// ErrStateInUse is returned by New when the state file (Options.StateFile) is
// held by a kernelbox process that still runs: two servers must not share the
// same sessions. It is the swarm and remote backends' too.
var ErrStateInUse = keep.ErrInUse

// keptContainer is one container as the state file lists it.
type keptContainer struct {
	ID       string        `json:"id"`
	Key      string        `json:"key"`
	Name     string        `json:"name"`
	Session  string        `json:"session"`
	SockDir  string        `json:"sock_dir"`
	Token    string        `json:"token"`
	Kernel   string        `json:"kernel_name"`
	Started  time.Time     `json:"started"`
	Memory   int64         `json:"memory"`
	MemTmpl  bool          `json:"memory_template,omitempty"`
	Lifetime time.Duration `json:"lifetime"`
	SockDev  uint64        `json:"sock_dev"`
	SockIno  uint64        `json:"sock_ino"`
	// Egress: the session's egress proxy ran in the process that made the
	// container. Without Policy the container cannot be taken back (its
	// kernel's only way out, a socket the forwarder dials, went with that
	// process).
	Egress bool `json:"egress,omitempty"`
	// Policy is the allowlist of a container whose proxy listened in its
	// network namespace (egressns.go) without secrets: the next process
	// listens there again and takes it back (readoptEgress).
	Policy *egress.Policy `json:"egress_policy,omitempty"`
	// Relay: the server is reached through the relay in the container (relay.go),
	// which connects to the next process's socket in SockDir by itself.
	Relay bool `json:"relay,omitempty"`
}

var containerIDRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check refuses a record that does not have the shape the backend writes, so that a
// tampered file cannot steer the backend to another container or directory.
func (k keptContainer) check(socketRoot string) error {
	if !containerIDRe.MatchString(k.ID) {
		return fmt.Errorf("container id %q is malformed", k.ID)
	}
	if !isContainerKey(k.Key) {
		return fmt.Errorf("container key %q is malformed", k.Key)
	}
	if err := keep.CheckSession(k.Session); err != nil {
		return err
	}
	switch {
	case k.Name != containerName(k.Session, "", false, k.Key) && !isWarmName(k.Name, k.Key):
		return fmt.Errorf("container name %q does not match its session and key", k.Name)
	case !keep.ValidToken(k.Token):
		return errors.New("token is malformed")
	case filepath.Base(k.SockDir) != k.Key || filepath.Clean(k.SockDir) != k.SockDir ||
		filepath.Dir(filepath.Dir(k.SockDir)) != socketRoot || !strings.HasPrefix(filepath.Base(filepath.Dir(k.SockDir)), socketRootPrefix):
		return fmt.Errorf("state directory %q is not one of the backend's", k.SockDir)
	case k.Policy != nil && (!k.Egress || k.Relay):
		return errors.New("an allowlist to listen for again without a proxy in the container's namespace")
	}
	if k.Policy != nil {
		if _, err := egress.Compile(*k.Policy); err != nil {
			return fmt.Errorf("network allowlist: %w", err)
		}
	}
	return nil
}

// readKept reads the state file at path for self. A missing file is no state and
// no error. Any other failure (unreadable, not this format, another host or boot)
// is an error: nothing in it is adopted. Records of the wrong shape are dropped
// and reported in skipped.
func readKept(path, socketRoot string, self owner) (kept map[string]keptContainer, skipped []string, err error) {
	var st keptState
	if ok, err := keep.Read(path, &st); !ok || err != nil {
		return nil, nil, err
	}
	if err := keep.CheckVersion(path, st.Version, keptVersion); err != nil {
		return nil, nil, err
	}
	if st.Host != self.host || st.Boot != self.boot {
		return nil, nil, fmt.Errorf("state file %s was written on host %q before its last boot or on another host: its containers are gone or not this host's", path, st.Host)
	}
	holder := owner{host: st.Host, boot: st.Boot, pid: st.Pid, start: st.Start}
	if gone, why := judge(holder, self, procStart); !gone && holder != self && st.Pid > 0 {
		return nil, nil, fmt.Errorf("%w: %s (%s)", ErrStateInUse, path, why)
	}
	kept = make(map[string]keptContainer, len(st.Containers))
	for _, k := range st.Containers {
		if err := k.check(socketRoot); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		kept[k.ID] = k
	}
	return kept, skipped, nil
}

// record returns p as the state file lists it, or false for a placement that is
// not a session's ready container.
func (p *Placement) record() (keptContainer, bool) {
	name, session := p.names()
	if !p.ready.Load() || p.closing.Load() || !api.ValidSessionID(session) {
		return keptContainer{}, false
	}
	k := keptContainer{
		ID: p.id, Key: p.key, Name: name, Session: session, SockDir: p.sockDir,
		Token: p.server.Endpoint.Token, Kernel: p.server.KernelName, Started: p.started,
		Memory: p.memory, MemTmpl: p.memTmpl, Lifetime: p.lifetime,
		SockDev: p.sockDev, SockIno: p.sockIno, Egress: p.egress != nil, Relay: p.relay != nil,
	}
	if p.egressKept != nil {
		pol := p.egressKept.Policy()
		k.Policy = &pol
	}
	return k, true
}

// saveKept writes the state file with the backend's ready session containers. A
// failure is logged: the containers then cannot be adopted by the next start.
func (b *Backend) saveKept() {
	if b.cfg.stateFile == "" {
		return
	}
	b.keptFile.Save(b.writeKept)
}

// writeKept writes the state file; it runs through b.keptFile.
func (b *Backend) writeKept() {
	b.mu.Lock()
	st := keptState{Version: keptVersion, Host: b.owner.host, Boot: b.owner.boot, Pid: b.owner.pid, Start: b.owner.start,
		Containers: []keptContainer{}}
	for _, p := range b.placements {
		if k, ok := p.record(); ok {
			st.Containers = append(st.Containers, k)
		}
	}
	b.mu.Unlock()
	keep.Write(b.cfg.log, b.cfg.stateFile, st)
}

// markRoot writes the socket root's marker naming the state file.
func markRoot(root, stateFile string) error {
	if stateFile == "" {
		return nil
	}
	return statefile.Write(filepath.Join(root, keptMarker), []byte(stateFile), true)
}

// keptElsewhere reports whether container id, whose state directory is sockDir, is
// listed in the state file its socket root's marker names: a container kept for
// another workspace's next start, which a reap must leave alone. files caches
// the state files read during one reap.
func keptElsewhere(id, sockDir string, files map[string]map[string]bool) bool {
	if sockDir == "" {
		return false
	}
	b, err := statefile.Read(filepath.Join(filepath.Dir(sockDir), keptMarker), 4096)
	if err != nil {
		return false
	}
	path := string(b)
	ids, ok := files[path]
	if !ok {
		ids = map[string]bool{}
		if data, err := statefile.Read(path, keep.MaxBytes); err == nil {
			var st keptState
			if json.Unmarshal(data, &st) == nil && st.Version == keptVersion {
				for _, k := range st.Containers {
					ids[k.ID] = true
				}
			}
		}
		files[path] = ids
	}
	return ids[id]
}
