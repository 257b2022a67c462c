package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/jupyter"
	"github.com/kernelbox/kernelbox/workspace"
)

// A call's files, before and after its code runs: its inputs staged into the
// session's inputs/ (stage), then its artifacts collected from outputs/ and from
// its displays' rich data (collect), within the session's disk quota.

// stage copies the call's inputs into the session's inputs/ and returns their names
// and a note for each.
func (s *session) stage(inputs []workspace.Input) (names, notes []string, err error) {
	if len(inputs) == 0 {
		return nil, nil, nil
	}
	staged, err := s.ws.Stage(inputs)
	if err != nil {
		return nil, nil, stageError(err)
	}
	for _, st := range staged {
		names = append(names, st.Name)
		note := fmt.Sprintf("staged inputs/%s (%d bytes)", st.Name, st.Size)
		if st.Unchanged {
			note += ", unchanged since it was last staged: not copied again"
		}
		notes = append(notes, note)
	}
	return names, notes, nil
}

// stageError classifies a staging failure: bad inputs are the caller's to fix.
func stageError(err error) error {
	if errors.Is(err, workspace.ErrPrivate) {
		return fmt.Errorf("%w: %w", api.ErrDenied, err)
	}
	for _, bad := range []error{workspace.ErrNotRegular, workspace.ErrDuplicateName, workspace.ErrInvalidName,
		workspace.ErrTooLarge, workspace.ErrSessionLimit, workspace.ErrLinkInPath} {
		if errors.Is(err, bad) {
			return fmt.Errorf("%w: %w", api.ErrInvalidRequest, err)
		}
	}
	return fmt.Errorf("stage inputs: %w", err)
}

// collect records the call's artifacts in f: new or changed files under outputs/
// (pulled from the kernel first for a FileSyncer placement) and the rich data of
// the cell's displays, saved to the artifacts directory, each display output noting
// the artifact it was saved as. ctx bounds the pull.
func (s *session) collect(ctx context.Context, f *callFacts, ex *jupyter.Execution) {
	// A kernel that is gone (a restart after a timeout failed) has nothing to pull.
	if syncer, ok := s.syncer(); ok && s.k.alive() {
		pctx, cancel := context.WithTimeout(ctx, s.e.opts.StartTimeout)
		err := syncer.PullOutputs(pctx, s.k.conn, s.ws.Dir(), probeResult(ex))
		cancel()
		if err != nil {
			f.notes = append(f.notes, "outputs: pulling files from the kernel failed: "+err.Error())
		}
	}
	if nr, ok := s.placementOf().(NetworkReporter); ok {
		rep := nr.TakeNetwork()
		f.notes = append(f.notes, rep.Notes...)
		if no, ok := s.e.opts.Observer.(NetworkObserver); ok && rep.Allowed+rep.Refused > 0 {
			no.NetworkReported(rep)
		}
	}
	s.enforceDiskQuota(f)
	// Notes for outputs still being written or last written before the code
	// started: a background thread or process of an earlier call may be at work.
	arts, notes, err := s.ws.CollectCall(f.codeStart)
	f.artifacts = append(f.artifacts, arts...)
	f.notes = append(f.notes, notes...)
	if err != nil {
		f.notes = append(f.notes, "artifacts: "+err.Error())
	}
	s.saveDisplays(f, ex)
	var total int64
	for _, a := range f.artifacts {
		total += a.Size
	}
	if len(f.artifacts) > 0 {
		s.e.opts.Observer.ArtifactsCollected(len(f.artifacts), total)
	}
}

// enforceDiskQuota ends the call with a DiskQuotaExceeded error when the
// session directory went over the disk quota (which the workspace then brought
// back under it by deleting the newest files). Sessions with a disk of their own
// never do: their code got ENOSPC instead.
func (s *session) enforceDiskQuota(f *callFacts) {
	err := s.ws.EnforceDiskQuota()
	if err == nil {
		return
	}
	f.notes = append(f.notes, "quota: "+err.Error())
	if errors.Is(err, workspace.ErrDiskQuota) && f.end.status == api.StatusOK {
		f.end.status = api.StatusError
		f.end.verdict = &api.ErrorInfo{Ename: "DiskQuotaExceeded", Evalue: err.Error()}
	}
}

// saveDisplays saves the rich data (api.RichTypes) of the cell's display and result
// outputs as artifacts named cell<N>-<msg id prefix>-<n><ext>.
func (s *session) saveDisplays(f *callFacts, ex *jupyter.Execution) {
	prefix := "x"
	if ex != nil {
		prefix = ex.MsgID()
		if len(prefix) > 8 {
			prefix = prefix[:8]
		}
	}
	n := 0
	for i := range f.out.outputs {
		out := &f.out.outputs[i]
		if out.OutputType != "display_data" && out.OutputType != "execute_result" {
			continue
		}
		for _, rich := range api.RichTypes() {
			raw, ok := out.Data[rich.MIME]
			if !ok {
				continue
			}
			data, ok := rich.Decode(raw)
			if !ok {
				continue
			}
			n++
			name := fmt.Sprintf("cell%d-%s-%d%s", f.end.count, prefix, n, rich.Ext)
			a, err := s.ws.SaveDisplay(name, data, rich.MIME)
			if err != nil {
				f.notes = append(f.notes, "display artifact: "+err.Error())
				continue
			}
			f.artifacts = append(f.artifacts, a)
			if out.Artifacts == nil {
				out.Artifacts = map[string]string{}
			}
			out.Artifacts[rich.MIME] = a.Name
		}
	}
}

// syncer returns the session's placement as a FileSyncer, if it is one.
func (s *session) syncer() (FileSyncer, bool) {
	if s.k == nil {
		return nil, false
	}
	fs, ok := s.k.placement.(FileSyncer)
	return fs, ok
}

// probeKey names the FileSyncer's outputs probe in a call's execute_request.
const probeKey = "kernelbox_outputs"

// foreignOutput returns the characters of output threads of earlier cells wrote
// during the call, as kernelbox's kernel launcher tells on the execute_reply
// (serverflags), or 0 from other kernels.
func foreignOutput(ex *jupyter.Execution) int {
	if ex == nil {
		return 0
	}
	reply, err := ex.Reply()
	if err != nil {
		return 0
	}
	return reply.Foreign
}

// probeResult returns the outputs probe's result from the call's reply.
func probeResult(ex *jupyter.Execution) json.RawMessage {
	if ex == nil {
		return nil
	}
	reply, err := ex.Reply()
	if err != nil {
		return nil
	}
	return reply.UserExpressions[probeKey]
}

// placementOf returns the placement of the session's kernel, or nil.
func (s *session) placementOf() Placement {
	if s.k == nil {
		return nil
	}
	return s.k.placement
}
