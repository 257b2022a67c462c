package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/egress"
	"github.com/kernelbox/kernelbox/executor"
)

// The egress scenario (issue 53): a kernel's download through its allowlist
// (urllib → the session's proxy, listening on the container's loopback itself
// or reached through the forwarder there → a server on this host's loopback),
// against the same urllib code run on the host through a proxy of the same
// rules on loopback (no container, no forwarder), in alternating rounds. Only
// on a backend of containers.
const (
	egressBytes  = 64 << 20 // one download
	egressRounds = 5        // each side, alternating (2 with Short)
)

// egressFetch is the download both sides run: fetch(url, proxy) returns the
// bytes read and the seconds taken. The server is on loopback, which the
// kernel's no_proxy names: the download goes through the proxy all the same.
const egressFetch = `import os, sys, time, urllib.request
def fetch(url, proxy):
    os.environ.pop("no_proxy", None)
    os.environ.pop("NO_PROXY", None)
    op = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    t0 = time.monotonic()
    n = 0
    with op.open(url, timeout=120) as r:
        while True:
            b = r.read(262144)
            if not b:
                break
            n += len(b)
    return n, time.monotonic() - t0
`

// egressFetchSocket is the same download in the kernel straight to the
// proxy's socket, without the forwarder: what the forwarder costs. Where the
// proxy listens in the container's network namespace itself (docker on runc
// as root) there is no forwarder and no socket: it prints noSocket.
const egressFetchSocket = `import http.client, os, socket, time
class _Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/tmp/.kernelbox-egress.sock")
def fetch_socket(url):
    if not os.path.exists("/tmp/.kernelbox-egress.sock"):
        return ("` + noSocket + `",)
    c = _Unix("proxy", timeout=120)
    t0 = time.monotonic()
    c.request("GET", url)
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(262144)
        if not b:
            break
        n += len(b)
    c.close()
    return n, time.monotonic() - t0
`

// egressBulk measures the kernel's download beside the host's.
func (r *runner) egressBulk(ctx context.Context) (Row, error) {
	name := r.backend + ": kernel egress bulk through the allowlist (64 MiB)"
	if !r.spec.Containers {
		return Row{Name: name, Note: "NOT MEASURED: only a backend of containers has a forwarder and an allowlist"}, nil
	}
	srv, url, err := serveZeros(egressBytes)
	if err != nil {
		return Row{}, err
	}
	defer srv.Close()
	host := strings.TrimPrefix(url, "http://")
	host = host[:strings.IndexByte(host, '/')]
	rules, err := egress.Compile(egress.Policy{Allow: []string{host}, CIDRs: []string{"127.0.0.1/32"}, MaxBytes: 1 << 40})
	if err != nil {
		return Row{}, err
	}
	proxyURL, closeProxy, err := hostProxy(rules)
	if err != nil {
		return Row{}, err
	}
	defer closeProxy()
	e, ws, err := r.newExecutorWith(ctx, func(o *executor.Options) {
		o.Templates = []executor.Template{{Name: "egress", Description: "the egress bench's allowlist", Network: rules}}
	})
	if err != nil {
		return Row{}, err
	}
	defer ws.Close()
	defer e.Close()
	req := api.Request{SessionID: "egress", Template: "egress", Timeout: 5 * time.Minute,
		Code: egressFetch + "print(*fetch(" + strconv.Quote(url) + ", os.environ['http_proxy']))"}
	bare := req
	bare.Code = egressFetchSocket + "print(*fetch_socket(" + strconv.Quote(url) + "))"
	var kb, ref, direct []float64
	for range r.iters(2, egressRounds) {
		s, err := r.kernelFetch(ctx, e, req)
		if err != nil {
			return Row{}, err
		}
		kb = append(kb, s)
		if s, ok, err := r.socketFetch(ctx, e, bare); err != nil {
			return Row{}, fmt.Errorf("without the forwarder: %w", err)
		} else if ok {
			direct = append(direct, s)
		}
		out, err := exec.CommandContext(ctx, r.c.Python, "-c", egressFetch+"print(*fetch(sys.argv[1], sys.argv[2]))", url, proxyURL).CombinedOutput()
		if err != nil {
			return Row{}, fmt.Errorf("host download: %w: %s", err, out)
		}
		if s, err = fetchSeconds(string(out)); err != nil {
			return Row{}, fmt.Errorf("host download: %w", err)
		}
		ref = append(ref, s)
	}
	rate := func(v []float64) float64 { return float64(egressBytes) / (1 << 20) / (percentile(v, .5) / 1000) }
	bareNote := "no forwarder: the proxy listens on the container's loopback itself"
	if len(direct) > 0 {
		bareNote = fmt.Sprintf("the kernel straight to the proxy's socket, no forwarder: %.0f MiB/s", rate(direct))
	}
	return Row{Name: name, N: len(kb), KB50: percentile(kb, .5), KB99: slices.Max(kb), Ref50: percentile(ref, .5), Ref99: slices.Max(ref),
		RefLabel: "host urllib, same rules' proxy",
		Note: fmt.Sprintf("kernel %.0f MiB/s, host %.0f MiB/s: %.0f %% of direct (median of %d alternating rounds; goal ≥ 80 %%); %s",
			rate(kb), rate(ref), 100*percentile(ref, .5)/percentile(kb, .5), len(kb), bareNote)}, nil
}

// noSocket is what egressFetchSocket prints when the container has no proxy
// socket (no forwarder either).
const noSocket = "no-socket"

// socketFetch runs egressFetchSocket's download in the kernel and returns its
// time in ms, or false when the container has no proxy socket.
func (r *runner) socketFetch(ctx context.Context, e *executor.Executor, req api.Request) (float64, bool, error) {
	res, _, err := r.exec(ctx, e, req)
	if err != nil {
		return 0, false, fmt.Errorf("kernel download: %w", err)
	}
	if strings.TrimSpace(res.Stdout) == noSocket {
		return 0, false, nil
	}
	s, err := fetchSeconds(res.Stdout)
	if err != nil {
		return 0, false, fmt.Errorf("kernel download: %w (stderr %q)", err, res.Stderr)
	}
	return s, true, nil
}

// kernelFetch runs a download in the kernel and returns its time in ms.
func (r *runner) kernelFetch(ctx context.Context, e *executor.Executor, req api.Request) (float64, error) {
	res, _, err := r.exec(ctx, e, req)
	if err != nil {
		return 0, fmt.Errorf("kernel download: %w", err)
	}
	s, err := fetchSeconds(res.Stdout)
	if err != nil {
		return 0, fmt.Errorf("kernel download: %w (stderr %q)", err, res.Stderr)
	}
	return s, nil
}

// fetchSeconds reads egressFetch's answer: the bytes, which must be
// egressBytes, and the seconds, returned in ms.
func fetchSeconds(out string) (float64, error) {
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, fmt.Errorf("download printed %q", out)
	}
	if f[0] != strconv.Itoa(egressBytes) {
		return 0, fmt.Errorf("downloaded %s bytes, want %d", f[0], egressBytes)
	}
	s, err := strconv.ParseFloat(f[1], 64)
	return s * 1000, err
}

// serveZeros serves n zero bytes at a URL on this host's loopback.
func serveZeros(n int) (*http.Server, string, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	body := make([]byte, n)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String() + "/zeros", nil
}

// hostProxy runs a proxy of rules on this host's loopback: the reference's.
func hostProxy(rules *egress.Rules) (string, func(), error) {
	p, err := egress.New(egress.Options{Rules: rules, Session: "bench-reference"})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		p.Close()
		return "", nil, err
	}
	done := make(chan struct{})
	go func() { _ = p.Serve(ln); close(done) }() // ends with Close
	return "http://" + ln.Addr().String(), func() { p.Close(); ln.Close(); <-done }, nil
}
