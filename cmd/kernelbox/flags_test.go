package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clearFlagEnv unsets the environment variables flags take their defaults from.
func clearFlagEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"KERNELBOX_BACKEND", "KERNELBOX_WORKSPACE", "KERNELBOX_TOKEN", "KERNELBOX_MCP_MAX_TEXT", "KERNELBOX_MCP_MAX_IMAGE"} {
		t.Setenv(k, "")
	}
}

// help returns what `kernelbox ARGS -h` prints, and checks that it exits 0.
func help(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := dispatch(context.Background(), append(args, "-h"), &stdout, &stderr)
	var ec exitCode
	require.True(t, errors.As(err, &ec) && ec.code == 0, "%v: %v", args, err)
	return stdout.String() + stderr.String()
}

// TestRunHelpFitsOneScreen: `kernelbox run -h` is under 30 lines (it was 103, with
// every server and backend flag), and so is `kernelbox exec -h`.
func TestRunHelpFitsOneScreen(t *testing.T) {
	clearFlagEnv(t)
	for _, cmd := range []string{"run", "exec"} {
		out := help(t, cmd)
		lines := strings.Count(out, "\n")
		assert.Less(t, lines, 30, "kernelbox %s -h is %d lines:\n%s", cmd, lines, out)
	}
	out := help(t, "run")
	for _, absent := range []string{"-warm", "-call-retention", "-mcp-max-text", "-gateway ", "-swarm-host", "-listen"} {
		assert.False(t, strings.Contains(out, absent), "run -h shows %s, which run does not use", absent)
	}
	assert.Contains(t, out, "Not shown: Backend docker (and swarm), Backend remote, Backend swarm")
}

// helpGroups parses grouped -h output: each heading and the flags under it.
func helpGroups(t *testing.T, out string) (titles []string, groups map[string][]string) {
	t.Helper()
	groups = map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	title := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  -"):
			require.NotEmpty(t, title, "a flag outside any group: %q", line)
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			groups[title] = append(groups[title], name)
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			title = strings.TrimSuffix(line, ":")
			titles = append(titles, title)
		}
	}
	return titles, groups
}

// TestServeHelpGroups: serve -h prints its flags under headings, each flag once,
// each in its group; mcp -h has the same groups but the server's own.
func TestServeHelpGroups(t *testing.T) {
	clearFlagEnv(t)
	titles, groups := helpGroups(t, help(t, "serve"))
	require.Equal(t, []string{"Engine", "Sessions", "Calls", "MCP", "Server",
		"Backend local", "Backend docker (and swarm)", "Backend remote", "Backend swarm"}, titles)
	fs, _ := serveFlagSet(io.Discard)
	seen := map[string]string{}
	for title, names := range groups {
		for _, n := range names {
			require.Empty(t, seen[n], "-%s under %s and %s", n, seen[n], title)
			seen[n] = title
		}
	}
	fs.VisitAll(func(f *flag.Flag) { assert.NotEmpty(t, seen[f.Name], "-%s not in serve -h", f.Name) })
	for name, title := range map[string]string{
		"backend": "Engine", "workspace": "Engine", "disk-quota": "Engine", "warm": "Sessions", "templates": "Sessions",
		"call-retention": "Calls", "mcp-max-image": "MCP", "listen": "Server", "max-conns": "Server", "no-dashboard": "Server",
		"python": "Backend local", "memory": "Backend docker (and swarm)", "gateway-token": "Backend remote", "swarm-host": "Backend swarm",
	} {
		assert.Equal(t, title, seen[name], "-%s", name)
	}

	titles, _ = helpGroups(t, help(t, "mcp"))
	require.Equal(t, []string{"Engine", "Sessions", "Calls", "MCP",
		"Backend local", "Backend docker (and swarm)", "Backend remote", "Backend swarm"}, titles)
}

// TestBackendFlagGroupsInRunHelp: `run --backend NAME -h` shows the groups of flags
// that backend reads, as the backend table says, and names the others.
func TestBackendFlagGroupsInRunHelp(t *testing.T) {
	clearFlagEnv(t)
	for _, b := range backends() {
		titles, _ := helpGroups(t, help(t, "run", "--backend", b.name))
		want := []string{"Notebook", "Engine"}
		for _, g := range b.flags {
			want = append(want, g.title)
		}
		assert.Equal(t, want, titles, "run --backend %s -h", b.name)
	}
}

// readFlagList reads testdata/flags/NAME.txt: name, type and default of each flag a
// command had before its flags were grouped.
func readFlagList(t *testing.T, name string) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "flags", name+".txt"))
	require.NoError(t, err)
	out := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		require.Len(t, f, 3, line)
		out[f[0]] = [2]string{f[1], f[2]}
	}
	return out
}

// runDropped are the flags run had only because every engine command took every
// flag: run keeps one session for one notebook and serves no client.
var runDropped = []string{
	"warm", "max-sessions", "idle-timeout",
	"call-retention", "max-calls", "call-log-bytes", "total-call-log-bytes", "call-result-bytes", "total-call-result-bytes",
	"mcp-max-text", "mcp-max-image",
}

// TestFlagsKept: every flag serve, mcp and run had keeps its name, type and
// default (run drops only runDropped), and no command gained one.
func TestFlagsKept(t *testing.T) {
	clearFlagEnv(t)
	serve, _ := serveFlagSet(io.Discard)
	mcp, _, _ := mcpFlagSet(io.Discard)
	run := (&runOptions{engine: newEngineFlags("local")}).flagSet(io.Discard, new(multiFlag), new(multiFlag))
	for name, fs := range map[string]*flagSet{"serve": serve, "mcp": mcp, "run": run} {
		want := readFlagList(t, name)
		if name == "run" {
			for _, n := range runDropped {
				require.Contains(t, want, n)
				delete(want, n)
			}
		}
		got := map[string][2]string{}
		fs.VisitAll(func(f *flag.Flag) { got[f.Name] = [2]string{fmt.Sprintf("%T", f.Value), fmt.Sprintf("%q", f.DefValue)} })
		if _, ok := want["max-conns"]; ok { // derived from this machine's file limit
			want["max-conns"] = [2]string{"*flag.intValue", fmt.Sprintf("%q", fmt.Sprint(defaultMaxConns()))}
		}
		assert.Equal(t, want, got, "kernelbox %s", name)
	}
}

// TestFlagEnvFallbacks: the flags that default to an environment variable still do.
func TestFlagEnvFallbacks(t *testing.T) {
	clearFlagEnv(t)
	t.Setenv("KERNELBOX_BACKEND", "docker")
	t.Setenv("KERNELBOX_WORKSPACE", "/srv/ws")
	t.Setenv("KERNELBOX_TOKEN", "tok")
	t.Setenv("KERNELBOX_MCP_MAX_TEXT", "123")
	t.Setenv("KERNELBOX_MCP_MAX_IMAGE", "456")
	fs, o := serveFlagSet(io.Discard)
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, "docker", o.engine.backend)
	assert.Equal(t, "/srv/ws", o.engine.workspace)
	assert.Equal(t, "tok", o.serve.token)
	assert.Equal(t, 123, o.server.mcp.maxText)
	assert.Equal(t, 456, o.server.mcp.maxImage)
	ro := &runOptions{engine: newEngineFlags("local")}
	require.NoError(t, ro.flagSet(io.Discard, new(multiFlag), new(multiFlag)).Parse(nil))
	assert.Equal(t, "docker", ro.engine.backend, "KERNELBOX_BACKEND is run's default too")
}

// sampleArgs returns every flag of list with a value its type accepts.
func sampleArgs(list map[string][2]string, skip ...string) []string {
	samples := map[string]string{
		"*flag.stringValue": "s", "*flag.durationValue": "2s", "*flag.intValue": "3", "*flag.int64Value": "3",
		"*flag.float64Value": "0.5", "*flag.boolValue": "true", "*main.sizeFlag": "512m", "*main.byteSize": "1GiB",
		"*main.multiFlag": "a=b", "*main.hostList": "h", "*main.hostsFlag": "files.test=192.0.2.7",
	}
	var args []string
	for name, tv := range list {
		if !slices.Contains(skip, name) {
			args = append(args, "--"+name+"="+samples[tv[0]])
		}
	}
	return args
}

// TestOldFlagsParse: a command line with every flag serve, mcp and run took before
// (run: but runDropped) is still accepted; the commands stop at their argument
// check, after parsing, before building anything.
func TestOldFlagsParse(t *testing.T) {
	clearFlagEnv(t)
	for _, tc := range []struct {
		cmd, want string
		extra     []string
	}{
		{"serve", "serve takes no arguments: x", []string{"x"}},
		{"mcp", "mcp takes no arguments: x", []string{"x"}},
		{"run", "run takes one notebook", []string{"a.ipynb", "b.ipynb"}},
	} {
		args := append([]string{tc.cmd}, sampleArgs(readFlagList(t, tc.cmd), runDropped...)...)
		var stderr bytes.Buffer
		err := dispatch(context.Background(), append(args, tc.extra...), io.Discard, &stderr)
		var ec exitCode
		require.True(t, errors.As(err, &ec), "%s: %v", tc.cmd, err)
		require.Contains(t, ec.msg, tc.want, "%s: %s", tc.cmd, stderr.String())
	}
	// The dropped flags are refused by run, as any unknown flag.
	for _, n := range runDropped {
		var stderr bytes.Buffer
		err := dispatch(context.Background(), []string{"run", "--" + n + "=1", "nb.ipynb"}, io.Discard, &stderr)
		require.Equal(t, exitCode{2, ""}, err, n)
		require.Contains(t, stderr.String(), "flag provided but not defined: -"+n)
	}
}

// TestRunBuildsNoServer: run's engine has no calls registry and no MCP options:
// only serve and mcp, which serve clients, make them.
func TestRunBuildsNoServer(t *testing.T) {
	clearFlagEnv(t)
	dir := t.TempDir()
	nb := filepath.Join(dir, "in.ipynb")
	writeNB(t, nb, nil, "1 + 1")
	o, err := parseRunArgs([]string{"--backend", "none", "--workspace", filepath.Join(dir, "ws"), "--workdir", dir, nb}, io.Discard)
	require.NoError(t, err)
	en, err := o.engine.build(context.Background(), slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	defer en.close()
	require.Nil(t, en.calls)
	require.Zero(t, en.mcp.MaxTextBytes)
}

// TestUsagePrinter: flags outside a group come first under "Flags:", each group
// under its heading, one line per flag, defaults as package flag prints them
// (none for a zero value, strings quoted), and hidden groups named at the end.
func TestUsagePrinter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := newFlags("x", &out)
	fs.intro = "Usage: kernelbox x [flags] ARG"
	fs.String("own", "", "a flag of the command's own")
	fs.add("First", func(fs *flag.FlagSet) {
		fs.Bool("on", false, "a switch")
		fs.String("name", "dflt", "a `NAME`")
		fs.Int("zero", 0, "no default shown")
	})
	fs.add("Second", func(fs *flag.FlagSet) { fs.Duration("wait", 0, "hidden") })
	fs.add("Third", func(fs *flag.FlagSet) { fs.Var(new(sizeFlag), "size", "a size") })
	fs.show = func(title string) bool { return title != "Second" }
	fs.hideNote = " (see elsewhere)"
	require.Equal(t, exitCode{0, ""}, parse(fs, []string{"-h"}))
	require.Equal(t, `Usage: kernelbox x [flags] ARG

Flags:
  -own string  a flag of the command's own
First:
  -name NAME   a NAME (default "dflt")
  -on          a switch
  -zero int    no default shown
Third:
  -size value  a size
Not shown: Second (see elsewhere)
`, out.String())
}

// TestHelpHidesTokens: a token taken from the environment is the flag's default,
// which -h never prints (package flag printed it: serve -h and exec -h showed
// KERNELBOX_TOKEN).
func TestHelpHidesTokens(t *testing.T) {
	clearFlagEnv(t)
	t.Setenv("KERNELBOX_TOKEN", "s3cret-token-value")
	for _, cmd := range []string{"serve", "mcp", "exec", "attach", "sessions", "cp", "dashboard"} {
		out := help(t, cmd)
		assert.False(t, strings.Contains(out, "s3cret-token-value"), "kernelbox %s -h prints the token", cmd)
	}
}

// TestHostsFlag: --egress-test-hosts takes NAME=ADDR[,ADDR...], repeatable, names
// in lower case; anything else is refused.
func TestHostsFlag(t *testing.T) {
	t.Parallel()
	var h hostsFlag
	require.NoError(t, h.Set("Files.test=192.0.2.7,2001:db8::7"))
	require.NoError(t, h.Set("files.test=192.0.2.8"))
	assert.Equal(t, "files.test=192.0.2.7 files.test=192.0.2.8 files.test=2001:db8::7", h.String())
	for _, bad := range []string{"files.test", "=192.0.2.7", "files.test=", "files.test=not-an-address", "files.test=192.0.2.7,"} {
		assert.Error(t, h.Set(bad), bad)
	}
}
