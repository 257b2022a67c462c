//go:build linux

package workspace

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// onlyArtifact runs Collect and requires exactly one artifact, which it returns.
func onlyArtifact(t *testing.T, s *Session) Artifact {
	t.Helper()
	arts, err := s.Collect()
	require.NoError(t, err)
	require.Len(t, arts, 1, "artifacts: %v", artifactNames(arts))
	return arts[0]
}

// A file some process still holds open for writing is collected as it is, marked
// partial; once the writer closes it, the next Collect reports it complete, also
// when closing did not change its size or mtime.
func TestCollectPartialHeldOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		more int // bytes written after the partial Collect, before closing
	}{
		{"grows then closes", 3 << 20},
		{"closes unchanged", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, nil)
			s := openSession(t, m, "p")
			p := filepath.Join(s.Dir(), "outputs", "big.bin")
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			require.NoError(t, err)
			t.Cleanup(func() { w.Close() })
			first := bytes.Repeat([]byte("a"), 700<<10)
			_, err = w.Write(first)
			require.NoError(t, err)

			a := onlyArtifact(t, s)
			assert.True(t, a.Partial, "collected while open for writing, at %d bytes", a.Size)
			assert.Equal(t, int64(len(first)), a.Size)
			assert.Equal(t, string(first), readFile(t, a.Path), "what it held so far is copied")

			// Still open and unchanged: nothing new to report.
			arts, err := s.Collect()
			require.NoError(t, err)
			assert.Empty(t, artifactNames(arts), "partial and unchanged")

			_, err = w.Write(bytes.Repeat([]byte("b"), tc.more))
			require.NoError(t, err)
			require.NoError(t, w.Close())
			final := readFile(t, p)

			a = onlyArtifact(t, s)
			assert.False(t, a.Partial, "the writer closed it")
			assert.Equal(t, int64(len(final)), a.Size)
			assert.Equal(t, final, readFile(t, a.Path))
			assert.Empty(t, collect(t, s), "complete and reported: not again")
		})
	}
}

// A file another process keeps appending to while Collect runs is marked partial,
// and the next Collect after that process exits reports its full size.
func TestCollectPartialAppending(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "p")
	p := filepath.Join(s.Dir(), "outputs", "log.txt")
	// The writer appends until its stdin closes, then writes "end" and exits.
	cmd := exec.Command("/usr/bin/python3", "-c", `
import sys, threading, time
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
with open(sys.argv[1], "ab", buffering=0) as f:
    print("open", flush=True)
    while not stop.is_set():
        f.write(b"x" * 4096)
        time.sleep(0.0002)
    f.write(b"end")
`, p)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line := make([]byte, 5)
	_, err = io.ReadFull(stdout, line)
	require.NoError(t, err)

	var size int64
	for i := 0; i < 3; i++ {
		// Collect reports a file only when it changed since the last Collect: wait
		// until the writer (which a busy machine may not schedule for a while) has
		// appended again.
		require.Eventually(t, func() bool {
			st, err := os.Stat(p)
			return err == nil && st.Size() > size
		}, 10*time.Second, time.Millisecond, "collect %d: the writer appended nothing", i)
		a := onlyArtifact(t, s)
		assert.True(t, a.Partial, "collect %d: still being appended to, reported at %d bytes", i, a.Size)
		size = a.Size
	}
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	final := readFile(t, p)
	require.Contains(t, final[len(final)-3:], "end")

	a := onlyArtifact(t, s)
	assert.False(t, a.Partial)
	assert.Equal(t, int64(len(final)), a.Size, "the whole file")
	assert.Equal(t, final, readFile(t, a.Path))
	t.Logf("final size %d bytes", len(final))
}

// Where the writer's descriptors cannot be seen (another user's process, a remote
// kernel), a file that changes while it is copied is still marked partial.
func TestCollectPartialStatChanged(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	m.noWriterScan = true
	s := openSession(t, m, "p")
	p := filepath.Join(s.Dir(), "outputs", "grow.bin")
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte("z"), 64<<10)
	// 32 MiB before the first Collect, so that each copy takes tens of
	// milliseconds, while the writer appends every fraction of one.
	for range 512 {
		_, err := w.Write(chunk)
		require.NoError(t, err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(chunk[:4096]); err != nil {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	partial := 0
	for i := 0; i < 3; i++ {
		arts, err := s.Collect()
		require.NoError(t, err)
		for _, a := range arts {
			if a.Partial {
				partial++
			}
		}
	}
	close(stop)
	<-done
	assert.Positive(t, partial, "a file growing during every Collect was never marked partial")

	// Reported again if the last Collect caught it partial, and complete.
	arts, err := s.Collect()
	require.NoError(t, err)
	for _, a := range arts {
		assert.False(t, a.Partial)
	}
	assert.Equal(t, readFile(t, p), readFile(t, filepath.Join(m.ArtifactsDir(), "p", "grow.bin")))
	t.Log("partial reports: " + strconv.Itoa(partial))
}

// CollectCall notes the artifacts the call's code may not have written in full:
// one modified before the call's code started, one still being written, and one
// complete after an earlier partial report.
func TestCollectCallNotes(t *testing.T) {
	t.Parallel()
	m := newManager(t, nil)
	s := openSession(t, m, "n")
	out := filepath.Join(s.Dir(), "outputs")
	arts, notes, err := s.CollectCall(time.Now())
	require.NoError(t, err)
	require.Empty(t, arts)
	require.Empty(t, notes)

	// Between the calls, something left running writes one file and opens another.
	writeFile(t, filepath.Join(out, "between.txt"), "from a background thread")
	w, err := os.Create(filepath.Join(out, "open.log"))
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	_, err = w.WriteString("so far")
	require.NoError(t, err)
	time.Sleep(2 * betweenSlack)
	start := time.Now()
	writeFile(t, filepath.Join(out, "during.txt"), "by the call")

	arts, notes, err = s.CollectCall(start)
	require.NoError(t, err)
	assert.Equal(t, []string{"between.txt", "during.txt", "open.log"}, artifactNames(arts))
	assert.Equal(t, []string{
		"outputs/between.txt was written between calls (last modified before this call's code started), not by this call's code",
		"outputs/open.log was still being written when collected (6 bytes so far); it is collected again when it changes; it was last written before this call's code started",
	}, notes)

	_, err = w.WriteString(", and the rest")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	arts, notes, err = s.CollectCall(time.Now())
	require.NoError(t, err)
	assert.Equal(t, []string{"open.log"}, artifactNames(arts))
	assert.False(t, arts[0].Partial)
	assert.Equal(t, []string{
		"outputs/open.log is complete now (20 bytes); an earlier call collected it while it was still being written",
	}, notes)
}
