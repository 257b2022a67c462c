package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
)

func TestSecPerGiB(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d     time.Duration
		bytes int64
		want  float64
	}{
		{4 * time.Second, 1 << 30, 4},
		{time.Second, 100 << 20, 10.24},
		{500 * time.Millisecond, 2 << 30, 0.25},
		{time.Second, 0, 0},
		{time.Second, -1, 0},
	} {
		require.InDelta(t, c.want, secPerGiB(c.d, c.bytes), 1e-9, "%s over %d bytes", c.d, c.bytes)
	}
}

func TestParseMeminfo(t *testing.T) {
	t.Parallel()
	used, err := parseMeminfo(strings.NewReader("MemTotal:       24684544 kB\nMemFree:        21880832 kB\nMemAvailable:   23994368 kB\nBuffers:          123 kB\n"))
	require.NoError(t, err)
	require.Equal(t, float64(24684544-23994368)*1024, used)
	_, err = parseMeminfo(strings.NewReader("MemTotal: 10 kB\n"))
	require.ErrorContains(t, err, "no MemTotal and MemAvailable")
	_, err = parseMeminfo(strings.NewReader("MemTotal: x kB\nMemAvailable: 1 kB\n"))
	require.ErrorContains(t, err, "MemTotal")
}

func TestSample(t *testing.T) {
	t.Parallel()
	v := make([]int, 100)
	for i := range v {
		v[i] = i
	}
	require.Equal(t, []int{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}, sample(v, 10))
	require.Equal(t, []int{1, 2}, sample([]int{1, 2}, 10))
}

func TestCountLabel(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1_250_000: "1.25 M", 125_000: "125 k", 2_000_000: "2 M", 999: "999"} {
		require.Equal(t, want, countLabel(n))
	}
}

func TestCountSessions(t *testing.T) {
	t.Parallel()
	h := countSessions([]api.SessionInfo{
		{ID: "h0000", State: api.StateHibernated, Snapshot: &api.SnapshotInfo{Bytes: 100}},
		{ID: "h0001", State: api.StateIdle},
		{ID: "h0002", State: api.StateHibernated, Snapshot: &api.SnapshotInfo{Bytes: 50}},
	})
	require.Equal(t, heldSessions{open: 3, live: 1, hibernated: 2, snapBytes: 150, hibernatedIdx: []int{0, 2}}, h)
}

// The durable scenario runs only when named: the full list of scenarios (and
// make test's short list) must not start a 15-minute run.
func TestDurableOnlyWhenNamed(t *testing.T) {
	t.Parallel()
	require.False(t, selected(nil, "durable"))
	require.True(t, selected(nil, "cold"))
	require.True(t, selected([]string{"cold", "durable"}, "durable"))
	require.False(t, selected([]string{"cold"}, "durable"))
	require.False(t, selected([]string{"durable"}, "cold"))
	require.Len(t, durableSizes(true), 2)
	require.Len(t, durableSizes(false), 4)
	require.Contains(t, durableSizes(false)[2].build, "1024 * 2**20 // 8")
	require.Len(t, warmSizes(true), 1)
	require.Len(t, warmSizes(false), 2)
	require.Equal(t, 1, warmTemplate(false).Warm, "the warm resume rows need a pool")
	require.Zero(t, warmTemplate(false).Memory)
	require.Equal(t, int64(1<<30), warmTemplate(true).Memory)
}
