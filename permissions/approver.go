package permissions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Approver settles decisions that no rule settled (Effect Ask), typically by asking a
// person. It returns true to allow. An error denies, with the error in the reason.
// Engine.Check calls it once per such decision, in order, and may call it from
// several goroutines at once when the Engine is shared.
type Approver interface {
	// Approve returns true to allow d. It must honour ctx where it can.
	Approve(ctx context.Context, d Decision) (bool, error)
}

// ApproverFunc adapts a function to an Approver.
type ApproverFunc func(ctx context.Context, d Decision) (bool, error)

// Approve calls f; a nil ApproverFunc refuses with an error.
func (f ApproverFunc) Approve(ctx context.Context, d Decision) (bool, error) {
	if f == nil {
		return false, errors.New("approve: nil ApproverFunc")
	}
	return f(ctx, d)
}

// maxAnswer bounds the length of an answer PromptApprover reads.
const maxAnswer = 1024

// PromptApprover asks a person on a terminal: it writes
//
//	Allow filesystem.read on /x/y? [y/N]
//
// to Out and reads one line from In. "y" or "yes" (any case, surrounding spaces
// ignored) allows; anything else refuses. End of input before a full line, a read
// error, or a line longer than 1 KiB is an error, which denies. The CLI uses it when
// its standard input is a terminal.
//
// A PromptApprover is safe for concurrent use: prompts are asked one at a time. It
// reads In one byte at a time so that it never consumes input beyond the answer.
// The context is checked before prompting; the read itself cannot be interrupted.
// Use it by pointer and do not copy it after first use.
type PromptApprover struct {
	// In is where answers are read. Required.
	In io.Reader
	// Out is where questions are written. Nil discards them.
	Out io.Writer

	mu sync.Mutex
}

var _ Approver = (*PromptApprover)(nil)

// Approve asks about d and waits for the answer.
func (p *PromptApprover) Approve(ctx context.Context, d Decision) (bool, error) {
	if p == nil || p.In == nil {
		return false, errors.New("prompt: no input to read an answer from")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("prompt: %w", err)
	}
	if p.Out != nil {
		if d.Reason != "" && d.Reason != "no rule matched" {
			if _, err := fmt.Fprintf(p.Out, "%s.\n", d.Reason); err != nil {
				return false, fmt.Errorf("prompt: %w", err)
			}
		}
		if _, err := fmt.Fprintf(p.Out, "Allow %s? [y/N] ", d.subject()); err != nil {
			return false, fmt.Errorf("prompt: %w", err)
		}
	}
	line, err := readLine(p.In)
	if err != nil {
		return false, fmt.Errorf("prompt: read answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	default:
		return false, nil
	}
}

// readLine reads up to and excluding the next '\n' without reading past it.
func readLine(r io.Reader) (string, error) {
	var line []byte
	var b [1]byte
	for empty := 0; ; {
		n, err := r.Read(b[:])
		if n == 1 {
			empty = 0
			if b[0] == '\n' {
				return string(line), nil
			}
			if len(line) >= maxAnswer {
				return "", errors.New("answer too long")
			}
			line = append(line, b[0])
			continue
		}
		switch {
		case err == io.EOF:
			return "", fmt.Errorf("no answer before end of input: %w", io.EOF)
		case err != nil:
			return "", err
		}
		if empty++; empty > 100 {
			return "", io.ErrNoProgress
		}
	}
}
