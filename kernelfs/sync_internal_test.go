package kernelfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPayloadRoutes(t *testing.T) {
	r := newRig(t, nil)
	ctx := context.Background()
	require.False(t, r.s.k.Literal(), "ipykernel 6 exposes the request: payloads ride in its content")

	r.run(t, "import sys\nm = sys.modules['"+moduleName+"']\nm._parent = lambda: {}")
	_, err := r.s.setup(ctx, r.conn, r.host)
	require.NoError(t, err)
	require.True(t, r.s.k.Literal(), "a kernel that hides the request gets literals")
	data := []byte("literal payload")
	require.NoError(t, os.WriteFile(filepath.Join(r.host, "inputs", "l.txt"), data, 0o644))
	require.NoError(t, r.s.PushInputs(ctx, r.conn, r.host, []string{"l.txt"}))
	require.Equal(t, "literal payload", r.run(t, "print(open('inputs/l.txt').read(), end='')"))

	// A second push of the same content is skipped: the remote file is unchanged.
	seq := r.s.k.Sent()
	require.NoError(t, r.s.PushInputs(ctx, r.conn, r.host, []string{"l.txt"}))
	require.Equal(t, seq+1, r.s.k.Sent(), "nothing but the setup probe was sent")
	// Changed remotely: sent again.
	r.run(t, "open('inputs/l.txt','w').write('tampered')")
	require.NoError(t, r.s.PushInputs(ctx, r.conn, r.host, []string{"l.txt"}))
	require.Equal(t, "literal payload", r.run(t, "print(open('inputs/l.txt').read(), end='')"))
}
