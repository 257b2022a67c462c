// Package paths holds kernelbox's rules for the names and paths that come from
// clients, configuration and kernels, written once: a session id
// ([CheckSessionID]), a single file name ([CheckName]), a relative path
// ([CheckPath]), and the opens that never follow a symbolic link at any
// component ([OpenNoFollow] for an absolute host path, [OpenBeneath] for a path
// below a directory handle). Every refusal is an [*Error] whose reason comes from
// one table ([Problem]), and which matches [ErrInvalidSessionID],
// [ErrInvalidName] or [ErrInvalidPath].
//
// Start reading at CheckName and CheckPath (rules.go), then open.go. The package
// imports nothing of kernelbox's but api, so workspace, kernelfs, executor and
// the backends can all use it.
package paths

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kernelbox/kernelbox/api"
)

// TempPrefix starts the names of the temporary files and directories kernelbox
// makes next to their final names (uploads, artifact copies, data copies,
// staging backups). Such names are never listed nor served, and the rules can
// refuse them from clients (NoTemp, PathRule).
const TempPrefix = ".kb-tmp-"

// MaxNameBytes is NAME_MAX on Linux and the BSDs: the longest file name, and the
// longest element of a path.
const MaxNameBytes = 255

// MaxPathBytes is PATH_MAX: the longest relative path CheckPath accepts.
const MaxPathBytes = 4096

// Sentinel errors, matched with errors.Is by every *Error of their kind.
var (
	// ErrInvalidSessionID means a session id does not follow api.SessionIDPattern.
	ErrInvalidSessionID = errors.New("invalid session id")

	// ErrInvalidName means a name is not a single file name (CheckName).
	ErrInvalidName = errors.New("invalid file name")

	// ErrInvalidPath means a path is not a plain relative path (CheckPath).
	ErrInvalidPath = errors.New("invalid path")
)

// Problem is one way a session id, name or path breaks its rule. Its String is
// the reason error messages give, from one table.
type Problem uint8

// The problems, in the order the checks find them.
const (
	_              Problem = iota
	NotSessionID           // not 1-64 characters of [A-Za-z0-9_-]
	Empty                  // "" (or "." for a path that may not name the directory itself)
	DotName                // a name that is "." or ".."
	HasSlash               // a name with a '/'
	HasNUL                 // a NUL byte
	NotUTF8                // not valid UTF-8 (JSON would show U+FFFD, which names nothing)
	NameTooLong            // a name over MaxNameBytes
	TempName               // a name, or a path's element, starting with TempPrefix
	PathTooLong            // a path over MaxPathBytes
	Absolute               // a path starting with '/'
	EmptyElement           // a path with "//" or a trailing '/'
	DotElement             // a path with a "." element
	DotDotElement          // a path with a ".." element
	ElementTooLong         // a path element over MaxNameBytes
	TooDeep                // a path of more elements than PathRule.MaxDepth allows
)

// reasons is the table of what each Problem says.
var reasons = [...]string{
	NotSessionID:   "not " + api.SessionIDRule,
	Empty:          "empty",
	DotName:        "not a file name",
	HasSlash:       "contains '/'",
	HasNUL:         "contains NUL",
	NotUTF8:        "not valid UTF-8",
	NameTooLong:    fmt.Sprintf("longer than %d bytes", MaxNameBytes),
	TempName:       "names kernelbox's temporary files (" + TempPrefix + "…)",
	PathTooLong:    fmt.Sprintf("longer than %d bytes", MaxPathBytes),
	Absolute:       "absolute; give a path relative to the session directory",
	EmptyElement:   "empty element (a doubled or trailing '/')",
	DotElement:     `"." element`,
	DotDotElement:  `".." element`,
	ElementTooLong: fmt.Sprintf("an element is longer than %d bytes", MaxNameBytes),
	TooDeep:        "too deep",
}

// String returns the reason for p, as error messages give it.
func (p Problem) String() string {
	if int(p) < len(reasons) && reasons[p] != "" {
		return reasons[p]
	}
	return fmt.Sprintf("problem %d", p)
}

// Kind says which rule an Error is about.
type Kind uint8

// The rules.
const (
	SessionID Kind = iota + 1 // CheckSessionID
	Name                      // CheckName
	Path                      // CheckPath
)

// kinds names each rule in messages and gives its sentinel.
var kinds = [...]struct {
	noun string
	err  error
}{
	SessionID: {"session", ErrInvalidSessionID},
	Name:      {"name", ErrInvalidName},
	Path:      {"path", ErrInvalidPath},
}

// Error is a refusal by one of the rules. Its message reads
// `name "a/b": contains '/': invalid file name`.
type Error struct {
	Kind    Kind
	Value   string // what was refused, as given
	Problem Problem
}

func (e *Error) Error() string {
	k := kinds[e.Kind]
	return fmt.Sprintf("%s %q: %s: %v", k.noun, e.Shown(), e.Problem, k.err)
}

// Unwrap returns the Kind's sentinel (ErrInvalidName, ...).
func (e *Error) Unwrap() error { return kinds[e.Kind].err }

// Shown is Value as messages show it: its first 64 bytes and "…" when it is
// longer than MaxNameBytes, so a refused 4 KiB path does not fill a log line.
func (e *Error) Shown() string {
	if len(e.Value) > MaxNameBytes {
		return e.Value[:64] + "…"
	}
	return e.Value
}

// CheckSessionID returns an *Error (ErrInvalidSessionID) unless id follows
// api.SessionIDPattern. Ids are validated, never rewritten. The rule has two
// names, one rule: api.ValidSessionID where a yes or no is enough (the front
// ends, the executor), CheckSessionID where the refusal is an error of this
// package's table (the workspace).
func CheckSessionID(id string) error {
	if !api.ValidSessionID(id) {
		return &Error{Kind: SessionID, Value: id, Problem: NotSessionID}
	}
	return nil
}

// NameRule selects the checks CheckName makes beyond the base rule.
type NameRule uint8

// Plain is the base rule every name follows: one path element a file can be made
// by, that is not empty, not "." or "..", without '/' or NUL, at most
// MaxNameBytes long. It is the rule of names kernelbox makes files and
// directories by (staged inputs, data mounts, saved displays).
const Plain NameRule = 0

// Extra checks, or-ed onto Plain.
const (
	// NeedUTF8 also refuses names that are not valid UTF-8.
	NeedUTF8 NameRule = 1 << iota
	// NoTemp also refuses names starting with TempPrefix.
	NoTemp
	// Listed is the rule of names a listing shows to clients (in JSON), which a
	// client must be able to ask for again: valid UTF-8, and none of kernelbox's
	// temporary names (they are never listed nor served).
	Listed = NeedUTF8 | NoTemp
)

// CheckName returns an *Error (ErrInvalidName) unless name is a single file name
// under rule.
func CheckName(name string, rule NameRule) error {
	if why := nameProblem(name, rule); why != 0 {
		return &Error{Kind: Name, Value: name, Problem: why}
	}
	return nil
}

func nameProblem(name string, rule NameRule) Problem {
	switch {
	case name == "":
		return Empty
	case name == "." || name == "..":
		return DotName
	case strings.ContainsRune(name, '/'):
		return HasSlash
	case strings.ContainsRune(name, 0):
		return HasNUL
	case len(name) > MaxNameBytes:
		return NameTooLong
	case rule&NeedUTF8 != 0 && !utf8.ValidString(name):
		return NotUTF8
	case rule&NoTemp != 0 && IsTemp(name):
		return TempName
	}
	return 0
}

// IsTemp reports whether name starts with TempPrefix.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// PathRule says what CheckPath accepts beyond a plain relative path. The zero
// value is the strictest rule, the one of the files API.
type PathRule struct {
	// AllowRoot accepts "" and "." for the directory itself.
	AllowRoot bool

	// AllowTemp accepts elements starting with TempPrefix (for paths a kernel
	// reports, which a check further on skips or reports).
	AllowTemp bool

	// MaxDepth, when positive, is how many directories a path may lead through:
	// at most MaxDepth+1 elements. Defaults to no bound but MaxPathBytes.
	MaxDepth int
}

// CheckPath returns an *Error (ErrInvalidPath) unless p is a plain relative
// path under rule: slash-separated, at most MaxPathBytes, valid UTF-8 without
// NUL, not absolute, and no element empty, "." or "..", over MaxNameBytes or
// (unless rule.AllowTemp) starting with TempPrefix.
func CheckPath(p string, rule PathRule) error {
	if why := pathProblem(p, rule); why != 0 {
		return &Error{Kind: Path, Value: p, Problem: why}
	}
	return nil
}

func pathProblem(p string, rule PathRule) Problem {
	switch {
	case p == "" || p == ".":
		if rule.AllowRoot {
			return 0
		}
		return Empty
	case len(p) > MaxPathBytes:
		return PathTooLong
	case strings.HasPrefix(p, "/"):
		return Absolute
	case strings.ContainsRune(p, 0):
		return HasNUL
	case !utf8.ValidString(p):
		return NotUTF8
	}
	n := 0
	for el := range strings.SplitSeq(p, "/") {
		n++
		switch {
		case el == "":
			return EmptyElement
		case el == ".":
			return DotElement
		case el == "..":
			return DotDotElement
		case len(el) > MaxNameBytes:
			return ElementTooLong
		case !rule.AllowTemp && IsTemp(el):
			return TempName
		}
	}
	if rule.MaxDepth > 0 && n > rule.MaxDepth+1 {
		return TooDeep
	}
	return 0
}
