package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// quickStart returns the command lines of README.md's Quick start block, with
// backslash continuations joined.
func quickStart(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "\n## Quick start\n")
	require.True(t, ok, "README.md has no Quick start section")
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "the Quick start section has no sh block")
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok, "the Quick start's sh block does not end")
	var lines []string
	var cont string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\")
			continue
		}
		if l = cont + l; strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
		cont = ""
	}
	return lines
}

// comment splits a shell line into its command and its trailing "# ..." comment.
func comment(line string) (cmd, note string) {
	if i := strings.Index(line, " #"); i >= 0 {
		return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+2:])
	}
	return strings.TrimSpace(line), ""
}

var (
	exitNote  = regexp.MustCompile(`exit status (\d+)`)
	firstWord = regexp.MustCompile(`^([^\s:,;]+)`)
)

// TestQuickStart runs README.md's Quick start word for word, as on a fresh
// machine: a new HOME, no KERNELBOX_* variables, `bin/kernelbox serve` with no
// --token (so serve makes one and keeps it in the runtime file) in the background
// on the default 127.0.0.1:8700, then each command as written. A command must exit
// as its comment says (0, or "exit status N") and print what the comment starts
// with ("42: state persists" prints 42). Then: the server is authenticated (a
// wrong token gets 401), `kernelbox dashboard` prints a link whose #token logs in,
// and serve printed the dashboard's address but never the token.
//
// As root (CI) it runs in its own network namespace, so port 8700 is its own; else
// it needs 8700 free. The README's backend is docker, so it needs the image.
func TestQuickStart(t *testing.T) {
	lines := quickStart(t)
	require.NotEmpty(t, lines)
	serveLine, _ := comment(lines[0])
	require.True(t, strings.HasPrefix(serveLine, "bin/kernelbox serve") && strings.HasSuffix(serveLine, "&"),
		"the quick start no longer starts with `bin/kernelbox serve ... &`: %q", lines[0])
	if strings.Contains(serveLine, "--backend docker") {
		testenv.Image(t, "kernelbox/kernel:latest")
	} else {
		testenv.Jupyter(t)
	}
	_, err1 := exec.LookPath("unshare")
	_, err2 := exec.LookPath("ip")
	netns := os.Geteuid() == 0 && err1 == nil && err2 == nil
	if !netns {
		ln, err := net.Listen("tcp", "127.0.0.1:8700")
		if err != nil {
			t.Skipf("skipping: not root (no network namespace of its own) and 127.0.0.1:8700 is taken: %v", err)
		}
		ln.Close()
	}

	// A directory laid out as the README assumes: bin/kernelbox and examples/.
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.MkdirAll(home, 0o700))
	b, err := os.ReadFile(kernelboxBin(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", "kernelbox"), b, 0o755))
	for _, l := range lines {
		for _, f := range strings.Fields(l) {
			if strings.HasPrefix(f, "examples/") {
				src, err := os.ReadFile(filepath.Join("..", "..", f))
				require.NoError(t, err, "the quick start names %s", f)
				require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), src, 0o644))
			}
		}
	}

	var sh strings.Builder
	sh.WriteString("cd " + strconv.Quote(dir) + "\n")
	if netns {
		sh.WriteString("ip link set lo up || exit 99\n")
	}
	// Serve's output goes to its own file; the README shows it on the terminal.
	fmt.Fprintf(&sh, "{ %s\n} >serve.log 2>&1\nserve=$!\n", lines[0])
	// A person types the next line after serve is up; wait for it the same way.
	sh.WriteString("i=0; until bin/kernelbox sessions >/dev/null 2>&1; do i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done\n")
	for i, l := range lines[1:] {
		fmt.Fprintf(&sh, "echo '=== %d'\n%s\necho \"=== exit $?\"\n", i+1, l)
	}
	sh.WriteString(`echo '=== wrong token'
bin/kernelbox sessions --token wrong-token
echo "=== exit $?"
echo '=== dashboard'
link=$(bin/kernelbox dashboard); st=$?; echo "link $link"
echo "=== exit $st"
echo '=== dashboard token'
bin/kernelbox sessions --token "${link#*#token=}"
echo "=== exit $?"
echo '=== page'
python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8700/").status)'
echo "=== exit $?"
kill -TERM $serve; wait $serve
echo "=== serve exit $?"
echo '=== serve log'
cat serve.log
`)
	// Started again, serve takes the sessions back (docker keeps them on a
	// stop; local hibernates them); this one closes them when it stops, so that
	// nothing is left.
	fmt.Fprintf(&sh, "{ %s --on-stop close &\n} >restart.log 2>&1\nserve=$!\n", strings.TrimSpace(strings.TrimSuffix(serveLine, "&")))
	sh.WriteString(`i=0; until bin/kernelbox sessions >/dev/null 2>&1; do i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done
echo '=== restart sessions'
bin/kernelbox sessions
echo "=== exit $?"
kill -TERM $serve; wait $serve
echo "=== restart exit $?"
echo '=== restart log'
cat restart.log
`)
	argv := []string{"sh", "-c", sh.String()}
	if netns {
		argv = append([]string{"unshare", "--net", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("the quick start, run:\n%s", out)

	// Split the transcript into its parts: "=== NAME" starts one, "=== exit N"
	// gives its exit status.
	parts, exits := map[string]string{}, map[string]int{}
	part := ""
	for _, l := range strings.SplitAfter(string(out), "\n") {
		head, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "=== ")
		switch {
		case !ok:
			parts[part] += l
		case strings.HasPrefix(head, "exit "), strings.HasPrefix(head, "serve exit "), strings.HasPrefix(head, "restart exit "):
			code, err := strconv.Atoi(head[strings.LastIndex(head, " ")+1:])
			require.NoError(t, err, l)
			if w, _, ok := strings.Cut(head, " exit "); ok {
				part = w // "serve", "restart"
			}
			exits[part] = code
		default:
			part = head
		}
	}
	for i, l := range lines[1:] {
		name := strconv.Itoa(i + 1)
		cmdLine, note := comment(l)
		want := 0
		if m := exitNote.FindStringSubmatch(note); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		assert.Equal(t, want, exits[name], "`%s` exited %d, the README says %d; it printed:\n%s", cmdLine, exits[name], want, parts[name])
		if m := firstWord.FindStringSubmatch(note); m != nil && !strings.HasPrefix(note, "exit status") {
			assert.Contains(t, parts[name], m[1], "`%s` does not print what the README says (%q)", cmdLine, note)
		}
		if strings.HasPrefix(cmdLine, "bin/kernelbox sessions") {
			assert.Contains(t, parts[name], "s1", "`%s` does not list the session", cmdLine)
		}
	}
	assert.Contains(t, parts["restart sessions"], "s1", "serve started again does not have the session")
	assert.Equal(t, 0, exits["restart"], "serve started again did not exit cleanly on SIGTERM")
	assert.NotEqual(t, 0, exits["wrong token"], "a wrong token was accepted")
	assert.Contains(t, parts["wrong token"], "unauthorized (401)")
	assert.Equal(t, 0, exits["dashboard"], parts["dashboard"])
	assert.Regexp(t, `(?m)^link http://127\.0\.0\.1:8700/#token=[0-9a-f]{64}$`, parts["dashboard"])
	assert.Equal(t, 0, exits["dashboard token"], parts["dashboard token"])
	assert.Contains(t, parts["dashboard token"], "s1")
	assert.Equal(t, "200\n", parts["page"], "the dashboard page")
	assert.Equal(t, 0, exits["serve"], "serve did not exit cleanly on SIGTERM")
	log := parts["serve log"]
	assert.Contains(t, log, "kernelbox serving on 127.0.0.1:8700")
	assert.Contains(t, log, "dashboard: http://127.0.0.1:8700/")
	if tok := regexp.MustCompile(`#token=([0-9a-f]{64})`).FindStringSubmatch(parts["dashboard"]); tok != nil {
		assert.NotContains(t, log, tok[1], "serve printed the token")
	}
}
