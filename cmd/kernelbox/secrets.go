package main

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kernelbox/kernelbox/executor"
)

// reloadSecretsOnHUP re-reads the values of every template's secrets (their
// from_env and from_file sources, egress.Secrets.Reload) each time serve gets
// SIGHUP, until the returned stop is called: a rotated key is used by every
// request intercepted after the reload, in running sessions too. The
// templates file itself is not read again. A template's reload is all or
// nothing: when a source fails, that template keeps its old values and the
// log says which rule and source failed (never a value). SIGHUP is caught only
// when some template has secrets; otherwise it keeps its default (the process
// ends).
func reloadSecretsOnHUP(ts []executor.Template, log *slog.Logger) (stop func()) {
	var with []executor.Template
	for _, t := range ts {
		if t.Network.Secrets() != nil {
			with = append(with, t)
		}
	}
	if len(with) == 0 {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-hup:
			}
			for _, t := range with {
				if err := t.Network.Secrets().Reload(); err != nil {
					log.Error("secrets reload failed; the template keeps its old values", "template", t.Name, "err", err)
					continue
				}
				log.Info("secrets reloaded", "template", t.Name, "rules", len(t.Network.Secrets().Rules()))
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}

// upstreamRoots reads --egress-upstream-ca: nil (the system's roots) for "".
func upstreamRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--egress-upstream-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--egress-upstream-ca %s: no PEM certificate in it", file)
	}
	return pool, nil
}
