package notebook_test

import (
	"context"
	"encoding/json"
	"github.com/kernelbox/kernelbox/api"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
	"github.com/kernelbox/kernelbox/internal/testkit/testexec"
	"github.com/kernelbox/kernelbox/notebook"
)

// TestRunChoosesTemplateByKernelName runs notebooks saved elsewhere as they are:
// the kernelspec name a notebook carries chooses the session's template (a
// template listing it in kernel_names; "python3" the default), and a named
// session that exists keeps its own.
func TestRunChoosesTemplateByKernelName(t *testing.T) {
	t.Parallel()
	testenv.Jupyter(t)
	te := testexec.Local(t, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "analysis", KernelNames: []string{"conda-env-analysis-py"},
			Env: map[string]string{"SHAPE": "analysis"}}}
	})
	withKernel := func(name string) *notebook.Notebook {
		nb := newNotebook(t, "import os\nprint(os.environ.get('SHAPE', 'plain'))")
		raw, err := json.Marshal(map[string]string{"name": name, "display_name": "Python 3", "language": "python"})
		require.NoError(t, err)
		nb.Metadata["kernelspec"] = raw
		return nb
	}
	for name, want := range map[string]string{"conda-env-analysis-py": "analysis\n", "python3": "plain\n",
		"analysis": "analysis\n", "some-other-kernel": "plain\n"} {
		nb := withKernel(name)
		rep, err := notebook.Run(context.Background(), te.Exec, nb, notebook.RunOptions{})
		require.NoError(t, err, name)
		require.Equal(t, api.StatusOK, rep.Status, "%s: %+v", name, rep.Error)
		require.Equal(t, want, streamText(nb.Cells[0], "stdout"), name)
	}
	// A named session that exists keeps its template.
	_, err := te.Exec.CreateSession(context.Background(), "nb-kept", "")
	require.NoError(t, err)
	nb := withKernel("conda-env-analysis-py")
	rep, err := notebook.Run(context.Background(), te.Exec, nb, notebook.RunOptions{SessionID: "nb-kept"})
	require.NoError(t, err)
	require.Equal(t, api.StatusOK, rep.Status, "%+v", rep.Error)
	require.Equal(t, "plain\n", streamText(nb.Cells[0], "stdout"))
}
