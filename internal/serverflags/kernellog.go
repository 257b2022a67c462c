package serverflags

import (
	"regexp"
	"slices"
	"strings"
)

// KernelLines returns the last n lines of a server's log (as Args configures it) that
// concern one kernel, joined by newlines: those that name it and those that name no
// kernel (the restarter's lines and a dying kernel's own output name none), but not
// those about other kernels, nor the server's lines about single requests.
func KernelLines(log []string, kernelID string, n int) string {
	var lines []string
	for _, l := range log {
		if l = strings.TrimSpace(l); l == "" || requestLine.MatchString(l) {
			continue
		}
		if ids := kernelIDPattern.FindAllString(l, -1); len(ids) == 0 || slices.Contains(ids, kernelID) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// requestLine matches the server's lines about single requests (such as the 404
// kernelbox gets when it asks after a kernel that is gone), which say nothing of
// the kernel.
var requestLine = regexp.MustCompile(`\] (\d{3} [A-Z]+ /|wrote error: )`)

// kernelIDPattern matches the UUIDs Jupyter Server names kernels by.
var kernelIDPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
