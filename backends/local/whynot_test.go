package local_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/local"
)

// The local backend says why it refuses a template's network allowlist (the
// executor puts it in the template's error), and gives no reason for the fields
// its not applying says enough about.
func TestWhyNot(t *testing.T) {
	t.Parallel()
	b := new(local.Backend)
	require.Contains(t, b.WhyNot("network"), "a local kernel is not confined")
	require.Empty(t, b.WhyNot("memory"))
}
