package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/internal/jupyterproc"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

func parseRemote(t *testing.T, args ...string) (remote.Options, error) {
	t.Helper()
	fs, o := serveFlagSet(io.Discard)
	require.NoError(t, fs.Parse(args))
	return o.engine.backends.remote.options(nil)
}

func TestRemoteFlags(t *testing.T) {
	t.Setenv("KERNELBOX_GATEWAY_TOKEN", "from-env")
	t.Setenv("KERNELBOX_GATEWAY", "")
	o, err := parseRemote(t, "--gateway", "http://a:1, https://b:2/eg", "--gateway", "http://c:3",
		"--kernel-name", "python3", "--kernel-env", "KERNEL_USERNAME=alice", "--kernel-env", "KERNEL_NAMESPACE=ns=1",
		"--gateway-ca", "/ca.pem", "--gateway-dir", "/scratch", "--gateway-transfer", "contents", "--gateway-health-interval", "2s",
		"--gateway-reap-after", "10m")
	require.NoError(t, err)
	require.Equal(t, []remote.Gateway{{URL: "http://a:1", Token: "from-env"}, {URL: "https://b:2/eg", Token: "from-env"}, {URL: "http://c:3", Token: "from-env"}}, o.Gateways)
	require.Equal(t, "python3", o.KernelName)
	require.Equal(t, map[string]string{"KERNEL_USERNAME": "alice", "KERNEL_NAMESPACE": "ns=1"}, o.KernelEnv)
	require.Equal(t, "/ca.pem", o.CACertFile)
	require.Equal(t, "/scratch", o.Sync.RemoteDir)
	require.Equal(t, remote.TransferContents, o.Transfer)
	require.Equal(t, 2*time.Second, o.HealthInterval)
	require.Equal(t, 10*time.Minute, o.Sync.ReapAfter)

	o, err = parseRemote(t, "--gateway", "http://a:1", "--gateway-token", "flag")
	require.NoError(t, err)
	require.Equal(t, "flag", o.Gateways[0].Token, "the flag wins over the environment")

	t.Setenv("KERNELBOX_GATEWAY", "http://env:1")
	o, err = parseRemote(t)
	require.NoError(t, err)
	require.Equal(t, "http://env:1", o.Gateways[0].URL)
	t.Setenv("KERNELBOX_GATEWAY", "")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "needs --gateway"},
		{[]string{"--gateway", "http://a:1", "--kernel-env", "NOVALUE"}, "want KEY=VALUE"},
		{[]string{"--gateway", "http://a:1", "--kernel-env", "=v"}, "want KEY=VALUE"},
		{[]string{"--gateway", "http://a:1", "--gateway-transfer", "ftp"}, "--gateway-transfer"},
	} {
		_, err := parseRemote(t, tc.args...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}

	// The token never shows in the usage text.
	var usage strings.Builder
	fs, _ := serveFlagSet(&usage)
	fs.Usage()
	require.NotContains(t, usage.String(), "from-env")
	require.Contains(t, usage.String(), "-gateway-token")
}

// TestServeRemote runs `kernelbox serve --backend remote` against a Jupyter Server
// on loopback TCP and runs code through `kernelbox exec`.
func TestServeRemote(t *testing.T) {
	py := testenv.Jupyter(t)
	gw, err := jupyterproc.Start(context.Background(), jupyterproc.Options{Python: py, RootDir: t.TempDir(), TCPAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.Stop(context.Background()) })
	bin := kernelboxBin(t)
	ws, data := testDirs(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	// A wrong token fails at start with a clear message.
	cmd := exec.Command(bin, "serve", "--backend", "remote", "--gateway", gw.Endpoint().URL, "--workspace", ws, "--workdir", data, "--listen", addr)
	cmd.Env = append(os.Environ(), "KERNELBOX_GATEWAY_TOKEN=wrong")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "403 Forbidden")
	require.NotContains(t, string(out), "wrong")

	log := &lockedBuffer{}
	cmd = exec.Command(bin, "serve", "--backend", "remote", "--gateway", gw.Endpoint().URL, "--workspace", ws, "--workdir", data,
		"--listen", addr, "--token", "t0k", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "KERNELBOX_GATEWAY_TOKEN="+gw.Endpoint().Token)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("kernelbox serve exited with %v; its log:\n%s", err, log)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	in := filepath.Join(data, "in.txt")
	require.NoError(t, os.WriteFile(in, []byte("hello"), 0o644))
	var res []byte
	require.Eventually(t, func() bool {
		c := exec.Command(bin, "exec", "--server", "http://"+addr, "--token", "t0k", "--input", in,
			"-c", "print(open('inputs/in.txt').read()); open('outputs/o.txt','w').write('x')")
		res, err = c.CombinedOutput()
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "exec: %s\nserve log:\n%s", res, log)
	require.Contains(t, string(res), "hello")
	require.Contains(t, string(res), "o.txt")
	require.NotContains(t, log.String(), gw.Endpoint().Token, "the gateway token must not be logged")
}
