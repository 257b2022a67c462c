package swarm

// Keeping sessions across a restart of kernelbox (issue 34 item 1). With
// Options.StateFile set, the backend keeps, in that file, what reaching each
// session's service again takes: the service's id and name, its network and token
// secret, its task, node and overlay address, its server's token and kernelspec,
// and the backend's instance and shared configs (the services use them). The file
// is rewritten whole (temporary file, fsync, rename, 0600), by one writer
// goroutine off the sessions' start path, each time a service becomes ready,
// changes session or is removed, so that a SIGKILL at any moment leaves either the
// old list or the new one. The next backend with the same
// StateFile and Owner reads it in New: it carries on as the same instance (the
// kept services' LabelInstance), so the reap spares what the file lists and
// removes the rest; reattach.go takes the services back.

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/backends/internal/keep"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// ErrStateInUse is returned (wrapped) by New when another backend, in this
// process or another kernelbox on the host, holds the state file
// (Options.StateFile, keep.Lock): two servers must not share the same
// sessions.
var ErrStateInUse = keep.ErrInUse

// keptVersion is the state file's format version; another version is refused.
const keptVersion = 1

// keptState is the state file.
type keptState struct {
	Version  int           `json:"version"`
	Owner    string        `json:"owner"`
	Instance string        `json:"instance"`
	Configs  []keptConfig  `json:"configs"`
	Services []keptService `json:"services"`
}

// keptConfig is one of the backend's shared swarm configs.
type keptConfig struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// keptService is one session's service as the state file lists it.
type keptService struct {
	Session  string    `json:"session"`
	Service  string    `json:"service"` // service id
	Name     string    `json:"name"`    // service and network name, kernelbox-<key>
	Network  string    `json:"network"`
	Secret   string    `json:"secret"`
	Task     string    `json:"task"`
	Node     string    `json:"node"`
	Addr     string    `json:"addr"` // the server's address on the session's network
	Token    string    `json:"token"`
	Kernel   string    `json:"kernel_name"`
	WorkSize int64     `json:"workspace_bytes"`
	Started  time.Time `json:"started"`
	// Proxy and Egress are the session's egress proxy address (kernelbox's
	// address on its network) and its template's allowlist, when it has one
	// (egress.go).
	Proxy  string         `json:"proxy,omitempty"`
	Egress *egress.Policy `json:"egress,omitempty"`
}

var (
	swarmIDRe     = regexp.MustCompile(`^[0-9a-z]{10,64}$`)
	serviceNameRe = regexp.MustCompile(`^kernelbox-[0-9a-f]{8}$`)
)

// check refuses a record that does not have the shape the backend writes, so that
// a tampered file cannot steer the backend to another service or address.
func (k keptService) check() error {
	if err := keep.CheckSession(k.Session); err != nil {
		return err
	}
	addr, err := netip.ParseAddrPort(k.Addr)
	switch {
	case !serviceNameRe.MatchString(k.Name):
		return fmt.Errorf("service name %q is not one of the backend's", k.Name)
	case !swarmIDRe.MatchString(k.Service) || !swarmIDRe.MatchString(k.Network) || !swarmIDRe.MatchString(k.Secret) ||
		!swarmIDRe.MatchString(k.Task) || !swarmIDRe.MatchString(k.Node):
		return fmt.Errorf("service %s: an id is malformed", k.Name)
	case !keep.ValidToken(k.Token):
		return fmt.Errorf("service %s: token is malformed", k.Name)
	case err != nil || addr.Port() != serverPort:
		return fmt.Errorf("service %s: address %q is not a server's", k.Name, k.Addr)
	case executor.CheckKernelName(k.Kernel) != nil:
		return fmt.Errorf("service %s: kernel name %q is malformed", k.Name, k.Kernel)
	case (k.Proxy == "") != (k.Egress == nil):
		return fmt.Errorf("service %s: a proxy address without an allowlist, or the other way round", k.Name)
	}
	if k.Proxy != "" {
		if ap, err := netip.ParseAddrPort(k.Proxy); err != nil || ap.Port() != proxyPort {
			return fmt.Errorf("service %s: proxy address %q is not a proxy's", k.Name, k.Proxy)
		}
		if _, err := egress.Compile(*k.Egress); err != nil {
			return fmt.Errorf("service %s: network allowlist: %w", k.Name, err)
		}
	}
	return nil
}

// readKept reads the state file at path for owner. A missing file is no state
// and no error. Any other failure (unreadable, not this format, another owner) is
// an error: nothing in it is adopted. Records of the wrong shape are dropped and
// reported in skipped.
func readKept(path, owner string) (st *keptState, skipped []string, err error) {
	st = &keptState{}
	if ok, err := keep.Read(path, st); !ok || err != nil {
		return nil, nil, err
	}
	if err := keep.CheckVersion(path, st.Version, keptVersion); err != nil {
		return nil, nil, err
	}
	if st.Owner != owner {
		return nil, nil, fmt.Errorf("state file %s was written for owner %q, this backend is %q", path, st.Owner, owner)
	}
	if _, err := uuid.Parse(st.Instance); err != nil {
		return nil, nil, fmt.Errorf("state file %s: instance %q is not a uuid", path, st.Instance)
	}
	services := st.Services[:0]
	for _, k := range st.Services {
		if err := k.check(); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		services = append(services, k)
	}
	st.Services = services
	for _, c := range st.Configs {
		if !swarmIDRe.MatchString(c.ID) {
			return nil, skipped, fmt.Errorf("state file %s: config id %q is malformed", path, c.ID)
		}
	}
	return st, skipped, nil
}

// ids returns the ids of every object the state lists: what the reap spares.
func (st *keptState) ids() map[string]bool {
	ids := map[string]bool{}
	for _, c := range st.Configs {
		ids[c.ID] = true
	}
	for _, k := range st.Services {
		ids[k.Service], ids[k.Network], ids[k.Secret] = true, true, true
	}
	return ids
}

// record returns p as the state file lists it, or false for a placement that is
// not a live session's service (a warm pool's, one closed or lost).
func (p *Placement) record() (keptService, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !api.ValidSessionID(p.obj.session) || p.loss.Reason() != "" {
		return keptService{}, false
	}
	k := keptService{
		Session: p.obj.session, Service: p.service, Name: p.obj.name, Network: p.obj.network, Secret: p.obj.secret,
		Task: p.task, Node: p.nodeID, Addr: p.addr.String(), Token: p.server.Endpoint.Token,
		Kernel: p.server.KernelName, WorkSize: p.workSize, Started: p.started,
	}
	if p.rules != nil {
		pol := p.rules.Policy()
		k.Proxy, k.Egress = p.proxy.String(), &pol
	}
	return k, true
}

// keptChanged asks the state writer (keepLoop) to write the state file again; it
// never blocks, so that no Open waits for the file's fsync.
func (b *Backend) keptChanged() {
	if b.cfg.stateFile == "" {
		return
	}
	select {
	case b.keepDirty <- struct{}{}:
	default:
	}
}

// keepLoop is the state writer: it writes the state file each time keptChanged
// asked, until the backend ends (Close and Detach write the last one themselves).
func (b *Backend) keepLoop() {
	done := b.gate.Life().Done()
	for {
		select {
		case <-done:
			return
		case <-b.keepDirty:
			b.saveKept()
		}
	}
}

// saveKept writes the state file with the backend's live session services. A
// failure is logged: the services then cannot be adopted by the next start.
func (b *Backend) saveKept() {
	if b.cfg.stateFile == "" {
		return
	}
	b.keptFile.Save(b.writeKept)
}

// writeKept writes the state file; it runs through b.keptFile.
func (b *Backend) writeKept() {
	st := keptState{Version: keptVersion, Owner: b.cfg.owner, Instance: b.instance, Services: []keptService{}}
	for _, c := range []swarmConfig{b.launcher, b.kernelspec, b.resolv} {
		if c.id != "" {
			st.Configs = append(st.Configs, keptConfig{ID: c.id, Name: c.name})
		}
	}
	st.Configs = append(st.Configs, b.oldConfigs...)
	b.mu.Lock()
	for p := range b.placements {
		if k, ok := p.record(); ok {
			st.Services = append(st.Services, k)
		}
	}
	b.mu.Unlock()
	keep.Write(b.cfg.log, b.cfg.stateFile, st)
}

// Adopt records the session that took a warm pool's service (executor.Adopter),
// so that the state file lists the service under it. The service's
// LabelSession keeps the pool's placeholder: a service's labels cannot change
// without a service update.
func (p *Placement) Adopt(_ context.Context, session string) error {
	p.mu.Lock()
	p.obj.session = session
	p.mu.Unlock()
	p.egress.Adopt(session) // its records and budget are the session's
	p.b.keptChanged()
	return nil
}
