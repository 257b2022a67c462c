package mcpserver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/api"
)

// header is the first line of the text answer, and the state-lost warning.
func header(res *api.Result) string {
	h := "status: " + string(res.Status)
	if res.ExecutionCount > 0 {
		h += " | execution_count: " + strconv.Itoa(res.ExecutionCount)
	}
	h += fmt.Sprintf(" | duration: %s | session: %s\n", duration(res.DurationMS), res.SessionID)
	if res.StateLost {
		h += "state_lost: true - the session's variables are gone (its kernel was restarted); re-run any setup code. Files are kept.\n"
	}
	if r := res.StateRestored; r != nil {
		h += fmt.Sprintf("state_restored: the session's variables were restored from %s before this call (%d names)", r.From, len(r.Restored))
		if len(r.NotRestored) > 0 {
			h += fmt.Sprintf("; %d not restored (see notes): re-create them", len(r.NotRestored))
		}
		h += ".\n"
	}
	return h
}

func noteLines(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return "\nnotes:\n- " + strings.Join(notes, "\n- ") + "\n"
}

func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}

// count formats n with thousands separators: 123,456.
func count(n int) string {
	if n < 0 {
		return "-" + count(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// humanBytes formats a size: 512 bytes, 12.3 KiB, 4 MiB.
func humanBytes(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return strconv.FormatInt(n, 10) + " bytes"
	case n < k*k:
		return trimZero(float64(n)/k) + " KiB"
	default:
		return trimZero(float64(n)/(k*k)) + " MiB"
	}
}

func trimZero(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0")
}

func duration(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return trimZero(float64(ms)/1000) + " s"
}
