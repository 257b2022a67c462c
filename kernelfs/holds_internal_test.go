package kernelfs

import (
	"context"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// HoldsDir says true only for the directory the kernel was set up in, whatever
// the module version that set it up, and a directory name cannot break out of
// the question. A syncer resumed on the directory (a kept kernel taken back by a
// new kernelbox, maybe of another version) carries on in it.
func TestHoldsDir(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	dir := r.s.Dir()
	require.NotEmpty(t, dir)
	var k Kernel
	for _, tc := range []struct {
		dir  string
		want bool
	}{
		{dir, true},
		{path.Dir(dir), false},
		{dir + "x", false},
		{"", false},
		{"') or True or ('", false},
		{dir + "'\n__import__('os')._exit(1)#", false},
	} {
		got, err := k.HoldsDir(ctx, r.conn, tc.dir)
		require.NoError(t, err, "%q", tc.dir)
		assert.Equal(t, tc.want, got, "%q", tc.dir)
	}

	// Another version's module (another name) set the kernel up.
	r.run(t, "import sys\nsys.modules['"+modulePrefix+"000000000000'] = sys.modules.pop('"+moduleName+"')")
	got, err := k.HoldsDir(ctx, r.conn, dir)
	require.NoError(t, err)
	assert.True(t, got, "recognised whatever the module's version")

	s2 := New(Options{})
	s2.Resume(dir)
	require.NoError(t, s2.PushInputs(ctx, r.conn, r.host, nil))
	assert.Equal(t, dir, s2.Dir(), "the same directory, not a new one")
	assert.Equal(t, dir+"\n", r.run(t, "import os; print(os.getcwd())"))
}
