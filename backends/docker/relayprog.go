package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
)

// The relay: how kernelbox reaches a container's Jupyter server when it cannot
// reach into the container (gVisor: a socket bound in the sandbox is invisible to
// the host, and /proc/<pid>/root is not the sandbox's file system). The relay runs
// in the container, as the kernel's user, started with docker exec before any
// kernel exists. It connects out, through the read-only state directory mounted
// at /run/kernelbox, to the socket kernelbox listens on there (relaySocket, one per
// container: no other session's socket is in that directory), and keeps a few
// connections open: one control connection whose end tells kernelbox the relay is
// gone, and a pool of idle ones. When kernelbox writes the first bytes of a
// request on a pooled connection, the relay connects to the server's socket on
// the container's /tmp, passes those bytes on, pipes both ways until either side
// closes, and opens another pooled connection in its place. The relay never
// writes first on a pooled connection except its one-byte kind, so kernelbox can
// tell an idle connection from a dead one (relay.go). With an egress allowlist,
// the relay also starts the forwarder (socat, egress.go) that carries the
// kernel's proxy port (127.0.0.1:egressPort) to the proxy's socket beside
// relaySocket, and opens its control connection only once that port listens, so
// a ready session's egress works at once.
//
// It is Debian's python3 from the image, one asyncio loop (no thread per
// connection), a program kernelbox passes on the command line: no file in the
// image, nothing fetched.

// In the container: the relay's socket and the egress proxy's, in the read-only
// state directory.
const (
	relaySocketName  = "relay.sock"
	egressSocketName = "egress.sock"
	relaySocket      = containerSocketDir + "/" + relaySocketName
	relayEgress      = containerSocketDir + "/" + egressSocketName
	// relayPool is how many idle connections the relay keeps open to kernelbox.
	relayPool = 4
)

// relayProgram is the relay; argv: server socket, host socket, pool size, and
// with an allowlist the forwarder's command line (forwarderCmd), which it
// starts as its child and waits for, reading /proc/net/tcp, before its control
// connection.
const relayProgram = `import asyncio, sys
SERVER, HOST, POOL, FORWARDER = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
FORWARDER_PORT = EGRESS_PORT
async def pipe(r, w):
    try:
        while True:
            d = await r.read(262144)
            if not d:
                break
            w.write(d)
            await w.drain()
        w.write_eof()
    except (OSError, RuntimeError):
        pass
async def join(r1, w1, r2, w2):
    try:
        await asyncio.gather(pipe(r1, w2), pipe(r2, w1))
    finally:
        w1.close()
        w2.close()
async def dial(path, kind):
    delay = 0.05
    while True:
        try:
            r, w = await asyncio.open_unix_connection(path)
            if kind:
                w.write(kind)
                await w.drain()
            return r, w
        except OSError:
            # kernelbox restarting: its socket comes back (adoption).
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
TASKS = set()
async def pooled():
    pause = 0.05
    while True:
        hr, hw = await dial(HOST, b"P")
        try:
            first = await hr.read(262144)
        except OSError:
            first = b""
        if not first:
            # Closed unused: kernelbox restarting, or refusing (its bound).
            hw.close()
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)
            continue
        pause = 0.05
        task = asyncio.ensure_future(serve(hr, hw, first))
        TASKS.add(task)
        task.add_done_callback(TASKS.discard)
async def serve(hr, hw, first):
    try:
        sr, sw = await asyncio.open_unix_connection(SERVER)
    except OSError:
        hw.close()
        return
    sw.write(first)
    await join(hr, hw, sr, sw)
async def control():
    while True:
        r, w = await dial(HOST, b"C")
        try:
            await r.read(1)
        except OSError:
            pass
        w.close()
def listening(port):
    want = ":%04X" % port
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            a = line.split()
            if len(a) > 3 and a[3] == "0A" and a[1].endswith(want):
                return True
    return False
async def forwarder():
    proc = await asyncio.create_subprocess_exec(*FORWARDER)
    delay = 0.005
    while not listening(FORWARDER_PORT):
        if proc.returncode is not None:
            sys.exit("relay: the forwarder (socat) exited with code %d" % proc.returncode)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)
async def main():
    if FORWARDER:
        await forwarder()
    await asyncio.gather(control(), *[pooled() for _ in range(POOL)])
asyncio.run(main())
`

// relayCmd is the relay's command line in the container; maxConns is the
// session's proxy's limit, 0 without an allowlist.
func relayCmd(python string, egress bool, maxConns int) []string {
	prog := strings.ReplaceAll(relayProgram, "EGRESS_PORT", strconv.Itoa(egressPort))
	cmd := []string{python, "-c", prog, containerSocket, relaySocket, strconv.Itoa(relayPool)}
	if egress {
		cmd = append(cmd, forwarderCmd(maxConns, relayEgress)...)
	}
	return cmd
}

// startRelay runs the relay in container id as the kernel's user. The exec is
// detached: the relay's end is told by its control connection (relay.go), which
// also works for a container adopted after a restart of kernelbox, whose exec
// stream would have gone with the earlier process.
func (b *Backend) startRelay(ctx context.Context, id string, egress bool, maxConns int) error {
	ex, err := b.api.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID),
		Cmd:  relayCmd(b.cfg.Python, egress, maxConns),
	})
	if err != nil {
		return fmt.Errorf("relay: create: %w", err)
	}
	if _, err := b.api.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("relay: start: %w", err)
	}
	return nil
}
