package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kernelbox/kernelbox/backends/remote"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/kernelfs"
)

// remoteFlags configure --backend remote: the gateways (Jupyter Server, Kernel
// Gateway or Enterprise Gateway) sessions are placed on.
type remoteFlags struct {
	gateways   multiFlag
	token      string
	ca         string
	kernelName string
	kernelEnv  multiFlag
	remoteDir  string
	transfer   string
	health     time.Duration
	reapAfter  time.Duration
}

// registerRemote adds the remote backend's flags.
func (c *backendConfig) registerRemote(fs *flag.FlagSet) {
	r := &c.remote
	fs.Var(&r.gateways, "gateway", "--backend remote: gateway URL, http(s)://HOST:PORT[/PREFIX]; comma-separated or repeated for several (also KERNELBOX_GATEWAY)")
	// No env default here: the flag's default would be printed by -h.
	fs.StringVar(&r.token, "gateway-token", "", "--backend remote: gateway token (default KERNELBOX_GATEWAY_TOKEN, which keeps it out of the process list)")
	fs.StringVar(&r.ca, "gateway-ca", "", "--backend remote: PEM file of CAs to trust for https gateways, besides the system's")
	fs.StringVar(&r.kernelName, "kernel-name", "", "--backend remote: kernelspec to start (default: the gateway's default)")
	fs.Var(&r.kernelEnv, "kernel-env", "--backend remote: KEY=VALUE sent in the kernel start request's env, e.g. KERNEL_USERNAME or KERNEL_NAMESPACE for Enterprise Gateway (repeatable)")
	fs.StringVar(&r.remoteDir, "gateway-dir", "", "--backend remote: base of the per-session working directories on the remote side, relative to the kernel's starting directory or absolute (default kernelbox-sessions)")
	fs.StringVar(&r.transfer, "gateway-transfer", "auto", "--backend remote: how inputs reach the kernel: auto, kernel, or contents (Jupyter Server's Contents API when the kernel sees its files)")
	fs.DurationVar(&r.health, "gateway-health-interval", 0, "--backend remote: how often each gateway is checked (default 5s)")
	fs.DurationVar(&r.reapAfter, "gateway-reap-after", 0, "--backend remote: how long a session directory on the remote side may go without its kernel's heartbeat before the next session there removes it as abandoned (default 1h, at least 1s)")
}

// options turns the flags into remote.Options.
func (r *remoteFlags) options(log *slog.Logger) (remote.Options, error) {
	var urls []string
	raw := []string(r.gateways)
	if len(raw) == 0 && os.Getenv("KERNELBOX_GATEWAY") != "" {
		raw = []string{os.Getenv("KERNELBOX_GATEWAY")}
	}
	for _, v := range raw {
		urls = append(urls, splitList(v)...)
	}
	if len(urls) == 0 {
		return remote.Options{}, errors.New("--backend remote needs --gateway URL (or KERNELBOX_GATEWAY)")
	}
	token := r.token
	if token == "" {
		token = os.Getenv("KERNELBOX_GATEWAY_TOKEN")
	}
	o := remote.Options{
		KernelName:     r.kernelName,
		CACertFile:     r.ca,
		HealthInterval: r.health,
		Sync:           kernelfs.Options{RemoteDir: r.remoteDir, ReapAfter: r.reapAfter},
		Logger:         log,
	}
	for _, u := range urls {
		o.Gateways = append(o.Gateways, remote.Gateway{URL: u, Token: token})
	}
	env, err := parseKernelEnv(r.kernelEnv)
	if err != nil {
		return remote.Options{}, err
	}
	o.KernelEnv = env
	if o.Transfer, err = remote.ParseTransfer(r.transfer); err != nil {
		return remote.Options{}, fmt.Errorf("--gateway-transfer: %w", err)
	}
	return o, nil
}

// parseKernelEnv parses repeated KEY=VALUE flags.
func parseKernelEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--kernel-env %q: want KEY=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

// openRemote builds the remote backend; it checks the gateways (bounded). It returns
// the interface, so that a failure is a nil interface rather than a nil pointer in one.
func openRemote(ctx context.Context, c *backendConfig, log *slog.Logger) (executor.Backend, error) {
	o, err := c.remote.options(log)
	if err != nil {
		return nil, err
	}
	o.StateFile = c.stateFile // serve: the sessions' kernels outlive a restart (stop.go)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := remote.New(ctx, o)
	if err != nil {
		return nil, err
	}
	for _, g := range b.Gateways() {
		if g.Healthy {
			log.Info("backend remote: gateway in rotation", "gateway", g.URL, "kernels", g.ServerKernels)
		} else {
			log.Warn("backend remote: gateway unreachable; it joins when a health check passes", "gateway", g.URL, "err", g.Error)
		}
	}
	return b, nil
}
