package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/kernelbox/kernelbox/audit"
	"github.com/kernelbox/kernelbox/tokens"
)

// accessFlags are serve's flags for scoped tokens and the audit log
// (docs/security.md): part of the "Server" group.
type accessFlags struct {
	auditLog      string // "" = <workspace>/state/audit.log; "off" = none
	auditMaxBytes int64
	maxTokens     int
}

// register adds the flags.
func (a *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.auditLog, "audit-log", "", "audit log file: a JSON line per request that changes state and per refusal, rotated at --audit-log-max-bytes (default WORKSPACE/state/audit.log; off to disable)")
	fs.Int64Var(&a.auditMaxBytes, "audit-log-max-bytes", 16<<20, "size at which the audit log is rotated (3 old files kept)")
	fs.IntVar(&a.maxTokens, "max-tokens", tokens.DefaultMaxTokens, "most scoped tokens kept (POST /v1/tokens past it: 429 too_many_tokens)")
}

// check refuses values serve cannot run with.
func (a *accessFlags) check() error {
	if a.maxTokens <= 0 || a.auditMaxBytes <= 0 {
		return exitCode{2, "--max-tokens and --audit-log-max-bytes must be positive"}
	}
	return nil
}

// open opens the token store and the audit log under stateDir (the
// workspace's private state: serve always has one). Its closer writes what
// the store has not written yet and closes the log.
func (a *accessFlags) open(stateDir string, en *engine, log *slog.Logger) (*tokens.Store, *audit.Log, func(), error) {
	if stateDir == "" {
		return nil, nil, nil, errors.New("scoped tokens need the workspace's state directory")
	}
	st, err := tokens.Open(stateDir, tokens.Options{
		MaxTokens: a.maxTokens,
		Exists:    func(id string) bool { _, err := en.exec.Session(id); return err == nil },
		Logger:    log,
	})
	if err != nil {
		return nil, nil, nil, exitCode{1, err.Error()}
	}
	var al *audit.Log
	if a.auditLog != "off" {
		path := a.auditLog
		if path == "" {
			path = filepath.Join(stateDir, "audit.log")
		}
		if al, err = audit.Open(path, audit.Options{MaxBytes: a.auditMaxBytes, Logger: log}); err != nil {
			_ = st.Close()
			return nil, nil, nil, exitCode{1, err.Error()}
		}
		log.Info("audit log", "path", path)
	}
	return st, al, func() {
		if err := st.Close(); err != nil {
			log.Warn("tokens", "err", err)
		}
		if err := al.Close(); err != nil {
			log.Warn("audit log", "err", err)
		}
	}, nil
}

// auditPath is where serve's audit log is for a workspace, by default.
func auditPath(workspace string) (string, error) {
	root, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	return filepath.Join(root, "state", "audit.log"), nil
}
