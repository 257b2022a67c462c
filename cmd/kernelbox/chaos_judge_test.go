package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kernelbox/kernelbox/api"
)

// TestChaosJudge: the restart-chaos test's judge of the invariant, on the cases
// issue 46 describes (no serve; fast).
func TestChaosJudge(t *testing.T) {
	t.Parallel()
	v := &chaosValue{name: "v_7", val: 7, call: 5}
	ckpt := func(after int, lost bool) []chaosTell {
		return []chaosTell{{where: "call", lost: lost, restored: &api.StateRestored{From: "checkpoint", AfterCall: after}}}
	}
	hib := func(restored []string, not map[string]string) []chaosTell {
		return []chaosTell{{where: "resume", restored: &api.StateRestored{From: "hibernation", Restored: restored, NotRestored: not}}}
	}
	for _, tc := range []struct {
		name  string
		got   string
		found bool
		tells []chaosTell
		want  chaosVerdict
	}{
		{"there", "7", true, nil, chaosKept},
		{"changed", "8", true, nil, chaosSilentLost},
		{"missing, nothing said", "", false, nil, chaosSilentLost},
		{"missing, state_lost", "", false, []chaosTell{{where: "call", lost: true, why: "kernel died"}}, chaosToldLost},
		{"missing, checkpoint before its call, state_lost", "", false, ckpt(3, true), chaosToldLost},
		{"missing, checkpoint before its call as if current (item 4)", "", false, ckpt(3, false), chaosSilentLost},
		{"missing, checkpoint after its call", "", false, ckpt(5, true), chaosSilentLost},
		{"there, checkpoint after its call", "7", true, ckpt(6, false), chaosKept},
		{"there, checkpoint said to be before its call (item 4 reversed)", "7", true, ckpt(4, false), chaosMisreported},
		{"missing, listed not restored", "", false, hib([]string{"x"}, map[string]string{"v_7": "could not be loaded"}), chaosToldLost},
		{"missing, listed restored", "", false, hib([]string{"v_7"}, nil), chaosSilentLost},
		{"missing from a partial restore told whole (item 3)", "", false, hib([]string{"a_first"}, nil), chaosSilentLost},
		{"missing, an empty fork that says state_lost", "", false, []chaosTell{{where: "fork", lost: true, why: "snapshot file is missing"}}, chaosToldLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := judgeValue(v, tc.got, tc.found, tc.tells)
			assert.Equal(t, tc.want, got, why)
			if got != chaosKept {
				assert.NotEmpty(t, why)
			}
		})
	}
	assert.Equal(t, "", judgeFile("f", "value 1\n", "value 1\n", true))
	assert.Equal(t, "emptied", judgeFile("f", "value 1\n", "", true))
	assert.Equal(t, "missing", judgeFile("f", "value 1\n", "", false))
	assert.Contains(t, judgeFile("f", "value 1\n", "x", true), "changed")

	o, ok := parseObserved("noise\n" + chaosMarker + `{"v": {"v_1": "1"}, "f": {"f_1.txt": ""}}` + "\nmore")
	if assert.True(t, ok) {
		assert.Equal(t, "1", o.V["v_1"])
		f, found := o.F["f_1.txt"]
		assert.True(t, found)
		assert.Empty(t, f)
	}
	_, ok = parseObserved("no check here")
	assert.False(t, ok)
}
