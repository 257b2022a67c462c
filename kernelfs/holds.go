package kernelfs

import (
	"context"
	"encoding/base64"

	"github.com/kernelbox/kernelbox/jupyter"
)

// modulePrefix begins the name of every version of the kernel-side module
// (moduleName): a kernelbox of another version set up kernels with another one.
const modulePrefix = "_kernelbox_sync_"

// holdsExpr returns the expression that tells whether the kernel process was set
// up in dir by a file-sync module of any version (its _state["dir"]). It reads
// and changes nothing else, installs nothing, and touches no file.
func holdsExpr(dir string) string {
	return "(lambda d: any(isinstance(getattr(m, '_state', None), dict) and m._state.get('dir') == d" +
		" for n, m in list(__import__('sys').modules.items()) if n.startswith('" + modulePrefix + "')))" +
		"(__import__('base64').b64decode('" + base64.StdEncoding.EncodeToString([]byte(dir)) + "').decode('utf-8'))"
}

// HoldsDir reports whether the kernel behind conn is one whose session directory
// was set up as dir (Syncer.Dir) by a kernelbox of any version. dir names a
// random nonce drawn by the kernelbox that made it (see Options.RemoteDir), so
// only a kernel that kernelbox set up holds it: the remote backend asks this
// before it takes a kept kernel back. The question is one silent user expression;
// nothing runs in a kernel that does not hold dir but that expression, which
// changes nothing.
func (k *Kernel) HoldsDir(ctx context.Context, conn *jupyter.Conn, dir string) (bool, error) {
	content := execContent{ExecuteRequest: jupyter.ExecuteRequest{Silent: true, UserExpressions: map[string]string{"r": holdsExpr(dir)}}}
	var answer string
	if err := k.exec(ctx, conn, "holds", content, rawText(&answer)); err != nil {
		return false, err
	}
	return answer == "True", nil
}

// Resume makes the syncer continue a session directory an earlier syncer set up
// (its Dir), in a kernel process that may hold it already (a kernel kept across a
// restart of kernelbox): the next setup enters dir again instead of making a new
// one, whichever version of the kernel-side module the kernel runs. Call it before
// the syncer's first use.
func (s *Syncer) Resume(dir string) { s.dir = dir }
