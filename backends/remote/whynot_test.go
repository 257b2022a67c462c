package remote_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/remote"
)

// The remote backend says why it refuses a template's network allowlist (the
// executor puts it in the template's error), and gives no reason for the fields
// its not applying says enough about.
func TestWhyNot(t *testing.T) {
	t.Parallel()
	b := new(remote.Backend)
	require.Contains(t, b.WhyNot("network"), "kernelbox has no say over a gateway's network")
	require.Empty(t, b.WhyNot("image"))
}
