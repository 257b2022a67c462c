package main

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/internal/runtimefile"
)

// hostList is a repeatable, comma-separated flag.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*h = append(*h, s)
		}
	}
	return nil
}

// serveGuard decides serve's access rules, which httpapi's guard enforces: the
// token (in *token) and the Host names. No TCP listener runs without a token:
// without --token one is made and written to this user's runtime file (removed by
// the returned function), where `kernelbox exec`, the Go client and `kernelbox
// sessions` find it. A unix socket (0600) stays tokenless and Host-free. A loopback
// listener accepts loopback Host names; any listener accepts --allowed-host names
// and its own IP literal. The routes exempt from the token are httpapi's (its
// route table), not decided here.
func serveGuard(network, listen, bound string, token *string, allowed hostList) (httpapi.Hosts, func(), error) {
	var g httpapi.Hosts
	if network == "unix" {
		return g, func() {}, nil
	}
	host, port, _ := net.SplitHostPort(listen)
	g.Loopback = isLoopback(host)
	g.Allowed = append([]string(nil), allowed...)
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		g.Allowed = append(g.Allowed, host)
	}
	if !g.Loopback && len(g.Allowed) == 0 {
		return g, nil, fmt.Errorf("--listen %s: set --allowed-host to the name(s) clients use to reach this server", listen)
	}
	remove := func() {}
	if *token == "" {
		*token = runtimefile.NewToken()
		_, bport, _ := net.SplitHostPort(bound)
		if port == "0" {
			port = bport
		}
		urls := []string{"http://" + net.JoinHostPort(host, port)}
		if g.Loopback || host == "" || net.ParseIP(host).IsUnspecified() {
			urls = append(urls, "http://127.0.0.1:"+port, "http://localhost:"+port, "http://[::1]:"+port)
		}
		var err error
		remove, err = runtimefile.Write(runtimefile.Info{Token: *token, PID: os.Getpid()}, urls...)
		if err != nil {
			return g, nil, fmt.Errorf("no --token given and the token cannot be kept: %w", err)
		}
	}
	return g, remove, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
