// Package serverflags builds the command line of a Jupyter Server that kernelbox starts
// itself (the local backend's child process and the docker backend's container), so
// both run the server the same way: on a unix socket, with a random token, and with the
// iopub rate limits off so that no output is dropped silently by the server (the
// executor caps output itself and says so).
package serverflags

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Config describes one Jupyter Server to start.
type Config struct {
	// Socket is the unix socket path the server listens on (as the server sees it).
	// Empty means TCP on IP:Port instead (the swarm backend's tasks, whose only way
	// in is their overlay network).
	Socket string
	// IP and Port are the TCP address the server listens on when Socket is empty.
	IP   string
	Port int
	// Token is the server's auth token; it must not be empty (an empty token makes
	// Jupyter Server refuse POSTs with 403 XSRF errors).
	Token string
	// RootDir is the server's root directory; kernel paths are relative to it.
	RootDir string
	// AllowRoot adds --allow-root; set it only when the server runs as uid 0.
	AllowRoot bool
	// DefaultKernel names the kernelspec started when a request names none.
	// Empty leaves the server's default (python3).
	DefaultKernel string
}

// Args returns the arguments that follow "python3 -m jupyter_server".
func Args(c Config) []string {
	var args []string
	if c.Socket != "" {
		args = []string{"--ServerApp.sock=" + c.Socket, "--ServerApp.sock_mode=0600"}
	} else {
		args = []string{
			"--ServerApp.ip=" + c.IP,
			"--ServerApp.port=" + strconv.Itoa(c.Port),
			"--ServerApp.port_retries=0",
			// Clients name the server by its address, which is not a loopback
			// one; the token guards every request.
			"--ServerApp.allow_remote_access=True",
		}
	}
	args = append(args,
		"--ServerApp.token="+c.Token,
		"--ServerApp.password=",
		"--ServerApp.root_dir="+c.RootDir,
		"--ServerApp.open_browser=False",
		// No server-side output dropping: kernelbox caps output per call and reports
		// truncation honestly, which a server-side drop would defeat.
		"--ServerApp.limit_rate=False",
		"--ServerApp.iopub_data_rate_limit=0",
		"--ServerApp.iopub_msg_rate_limit=0",
		// Tracebacks are the point of running code for an agent.
		"--MappingKernelManager.allow_tracebacks=True",
		// Notice a dead kernel within half a second (the default polls every 3 s),
		// so a call whose kernel died ends as kernel_died, not as a timeout.
		"--KernelRestarter.time_to_dead=0.5",
		// Kernels are culled by the executor, which knows about sessions.
		"--MappingKernelManager.cull_idle_timeout=0",
		// Pings keep a dead peer from holding a websocket open forever. The server
		// closes a connection that has not answered for ws_ping_timeout (30 s by
		// default), and output it writes between that close and its switch to
		// buffering for the reconnect is lost: a client whose reader a slow
		// consumer held up for 30 s lost output so. Peers of the servers kernelbox
		// starts are on a unix socket, where a dead one shows as EOF at once, so
		// the wait can be long.
		"--ServerApp.tornado_settings="+"{'ws_ping_interval':10000,'ws_ping_timeout':300000}",
		// INFO adds little (kernel starts, shutdowns and the restarter's lines;
		// requests log at DEBUG) and says why a kernel vanished while it started.
		"--ServerApp.log_level=INFO",
	)
	if c.DefaultKernel != "" {
		args = append(args, "--MappingKernelManager.default_kernel_name="+c.DefaultKernel)
	}
	if c.AllowRoot {
		args = append(args, "--allow-root")
	}
	return args
}

// TokenConfig returns the body of a jupyter_server_config.json that sets the server's
// token, for a server whose token must stay off its command line (world-readable in
// /proc/PID/cmdline and ps): pass WithoutToken(Args(c)) and put the file in the
// server's JUPYTER_CONFIG_DIR.
func TokenConfig(token string) ([]byte, error) {
	return json.Marshal(map[string]any{"ServerApp": map[string]any{"token": token}})
}

// WithoutToken drops the token flag from a server command line: the token comes from
// the config file instead (a flag would override it, even an empty one).
func WithoutToken(args []string) []string {
	out := args[:0:0]
	for _, a := range args {
		if !strings.HasPrefix(a, "--ServerApp.token=") {
			out = append(out, a)
		}
	}
	return out
}
