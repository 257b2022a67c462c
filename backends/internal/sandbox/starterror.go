package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/moby/moby/api/pkg/stdcopy"
)

// What a [StartError] is about.
const (
	KindContainer = "container" // a docker container
	KindService   = "service"   // a swarm service
)

// StartError is returned by a backend's Open when a container or service was
// created but its Jupyter server did not become ready. What the Open made has been
// removed by the time the error is returned; the fields keep what it said before
// it went.
type StartError struct {
	// Kind is KindContainer or KindService.
	Kind string
	// Name is the container's or service's name.
	Name string
	// Err is the cause: a timeout, the container or task ending, an API failure.
	Err error
	// Node is the node a swarm task was placed on, if any.
	Node string
	// State is a swarm task's last state ("failed", "rejected", ...), if known.
	State string
	// Running reports whether a docker container was still running when Open gave
	// up; ExitCode and OOMKilled are its exit code and Docker's OOM flag otherwise.
	Running   bool
	ExitCode  int
	OOMKilled bool
	// Logs holds the last log lines (stdout and stderr interleaved).
	Logs []string
}

// Error describes the failure with the container's or task's state and the last
// log lines.
func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start %s %s", e.Kind, e.Name)
	if e.Node != "" {
		fmt.Fprintf(&b, " on %s", e.Node)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	switch {
	case e.Kind == KindService && e.State != "":
		fmt.Fprintf(&b, " (task %s)", e.State)
	case e.Kind == KindService:
	case e.Running:
		fmt.Fprintf(&b, " (%s still running)", e.Kind)
	default:
		fmt.Fprintf(&b, " (%s exited with code %d", e.Kind, e.ExitCode)
		if e.OOMKilled {
			b.WriteString(", OOM-killed")
		}
		b.WriteString(")")
	}
	if len(e.Logs) == 0 {
		fmt.Fprintf(&b, "; no %s logs", e.Kind)
		return b.String()
	}
	fmt.Fprintf(&b, "; last %s log lines:", e.Kind)
	for _, l := range e.Logs {
		b.WriteString("\n    ")
		b.WriteString(l)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// maxLogBytes bounds what LogLines reads of a log stream.
const maxLogBytes = 1 << 20

// LogLines returns the last n non-blank lines of a container's or service's log,
// as the engine's logs call returned it (rc, err: stdout and stderr multiplexed,
// kept in their order), or one line saying why it could not be read. It reads at
// most 1 MiB and closes rc.
func LogLines(rc io.ReadCloser, err error, n int) []string {
	if err != nil {
		return []string{"(logs unavailable: " + err.Error() + ")"}
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := stdcopy.StdCopy(&buf, &buf, io.LimitReader(rc, maxLogBytes)); err != nil && buf.Len() == 0 {
		return []string{"(logs unreadable: " + err.Error() + ")"}
	}
	var lines []string
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 0, 64<<10), maxLogBytes)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), " \t\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
