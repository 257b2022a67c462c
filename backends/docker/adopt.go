package docker

// Container names say which session a container serves, where an operator looks
// (`docker ps`, whose NAMES column is all it shows of a container's identity by
// default): kernelbox-<session>-<key>, the key being 8 random hex digits that keep
// names unique and also name the container's state directory. A warm pool's
// container is created before any session takes it: it is kernelbox-warm.<template>-<key>
// ('.' is in no session id, so no session's container is named so) and labelled
// with the pool's placeholder (LabelSession ".warm-…"). Docker cannot change a
// container's labels, but it renames a running container: when a session takes the
// warm kernel, the container becomes kernelbox-<session>-<key>. Its LabelSession
// stays the placeholder, so a session's container is found by name:
//
//	docker ps --filter name='^kernelbox-SESSION-[0-9a-f]{8}$'

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/client"

	"github.com/kernelbox/kernelbox/backends/internal/dockerapi"
)

// containerName is the name of a container with key serving session, or of a warm
// pool's member of template tmpl when warm.
func containerName(session, tmpl string, warm bool, key string) string {
	if warm {
		if tmpl == "" {
			tmpl = "default"
		}
		return "kernelbox-warm." + nameSafe(tmpl) + "-" + key
	}
	return "kernelbox-" + nameSafe(session) + "-" + key
}

// isWarmName reports whether name is a warm pool member's container name with key
// (containerName with warm set, whatever its template): a session that took it is
// listed under that name until its rename (AdoptNow).
func isWarmName(name, key string) bool {
	tmpl, ok := strings.CutPrefix(name, "kernelbox-warm.")
	if !ok {
		return false
	}
	tmpl, ok = strings.CutSuffix(tmpl, "-"+key)
	return ok && tmpl != "" && nameSafe(tmpl) == tmpl
}

// nameSafe keeps what Docker allows in a name ([a-zA-Z0-9_.-]; every session id and
// template name the executor accepts is made of these), replaces anything else with
// '_', and keeps at most 64 characters. Names are for people: ownership and
// clean-up go by labels.
func nameSafe(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// Adopt renames a warm pool's container after the session that took its kernel
// (executor.Adopter), so that `docker ps` shows which session it serves. It is a
// no-op for a container already named after its session.
func (p *Placement) Adopt(ctx context.Context, session string) error {
	p.egress.Adopt(session) // records and budget are the session's, renamed or not
	renamed, err := p.rename(ctx, session)
	if renamed {
		p.b.saveKept() // the state file lists it under its session from now on
	}
	return err
}

// AdoptNow makes the egress proxy's records and budget the session's
// (executor.EarlyAdopter): its first call's connections count as its own. It also
// lists the container under its session in the state file, still under its pool
// name, on a goroutine of the backend's gate that runs beside the session's first
// call (a write and an fsync, no engine round trip), so that a serve killed right
// after that call's answer takes the session back (reattach goes by container id;
// the name is for people). The executor runs Adopt, whose rename takes a round
// trip to the engine, once that call ended.
func (p *Placement) AdoptNow(session string) {
	p.egress.Adopt(session)
	p.nameMu.Lock()
	p.session = session
	p.nameMu.Unlock()
	_, leave, ok := p.b.gate.Enter(context.Background())
	if !ok {
		return // closing or detaching: the last state file is written by them
	}
	go func() {
		defer leave()
		p.b.saveKept()
	}()
}

// nameAfterSession renames a container taken back after a restart that still
// has its warm pool's name (serve was killed after AdoptNow listed it under its
// session and before Adopt renamed it); a failure is logged, the name being only
// for people.
func (p *Placement) nameAfterSession(ctx context.Context) {
	_, session := p.names()
	if _, err := p.rename(ctx, session); err != nil {
		p.b.cfg.log.Warn("an adopted container keeps its warm pool's name", "session", session, "err", err)
	}
}

// rename renames the container after session, unless it is named so already.
func (p *Placement) rename(ctx context.Context, session string) (bool, error) {
	name := containerName(session, "", false, p.key)
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	if p.name == name {
		return false, nil
	}
	if _, err := p.b.api.ContainerRename(ctx, p.id, client.ContainerRenameOptions{NewName: name}); err != nil {
		return false, fmt.Errorf("rename container %s to %s: %w", p.name, name, err)
	}
	p.b.cfg.log.Debug("warm container taken by a session; renamed", "session", session, "container", dockerapi.Short(p.id), "was", p.name, "name", name)
	p.name, p.session = name, session
	return true, nil
}

// Name returns the container's name (kernelbox-<session>-<key>, see Adopt).
func (p *Placement) Name() string {
	name, _ := p.names()
	return name
}

// names returns the container's name and the session it serves.
func (p *Placement) names() (name, session string) {
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	return p.name, p.session
}
