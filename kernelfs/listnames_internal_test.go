package kernelfs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListDropsUnlistableNames: the host does not trust the kernel's listing.
// Code in the kernel can stop the module's own filter; the host still leaves out
// what no client could ask for again (paths.Listed): kernelbox's temporary names
// and names that are not one plain element, as a local session's List does.
func TestListDropsUnlistableNames(t *testing.T) {
	r := newRig(t, nil)
	f := r.s.Files(r.conn, Limits{})
	r.run(t, "import sys\n"+
		"sys.modules["+quoted(moduleName)+"].TMP = '\\0never'\n"+
		"open('.kb-tmp-planted', 'w').write('x')\n"+
		"open('kept.txt', 'w').write('x')")
	l, err := f.List(context.Background(), "", 0)
	require.NoError(t, err)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	require.Contains(t, names, "kept.txt")
	require.NotContains(t, names, ".kb-tmp-planted")
}
