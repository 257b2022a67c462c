package permissions

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Target patterns are absolute, slash-separated path globs:
//
//	*   any run of characters within one path element (including none)
//	?   exactly one character
//	**  a whole element only: any number of elements, including zero,
//	    so /a/** matches /a itself and everything below it but not /ab
//
// A pattern may start with ${workdir}, ${home} or ${artifacts}; a variable's value is
// always literal, even if it contains * or ?. There are no character classes and no
// escapes, and dot files get no special treatment: * matches ".ssh". The package
// matches paths, not file contents, so "." and empty elements are ignored and ".." is
// rejected: canonical targets never contain it.

// elemKind tells how one element of a pattern matches one element of a path.
type elemKind uint8

const (
	elemLiteral elemKind = iota // the element's text, byte for byte
	elemGlob                    // text with * and ? wildcards
	elemAny                     // **: any number of whole elements
)

// elem is one element of a path pattern.
type elem struct {
	kind elemKind
	text string
}

// matches reports whether the single path element name matches e; it must not be
// called for elemAny.
func (e elem) matches(name string) bool {
	if e.kind == elemLiteral {
		return e.text == name
	}
	return matchWildcard(e.text, name)
}

// pathPattern is a target pattern parsed but not yet expanded: variable names the
// variable it starts with, if any, and elems are the elements after it.
type pathPattern struct {
	variable string
	elems    []elem
}

// parsePattern checks the syntax of a target pattern and splits it into elements.
func parsePattern(s string) (pathPattern, error) {
	var p pathPattern
	if strings.IndexByte(s, 0) >= 0 {
		return p, errors.New("pattern contains a NUL byte")
	}
	rest := filepath.ToSlash(s)
	switch {
	case strings.HasPrefix(rest, "${"):
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return p, errors.New("unterminated ${")
		}
		name := rest[2:end]
		if !isKnownVar(name) {
			return p, fmt.Errorf("unknown variable ${%s} (want ${workdir}, ${home} or ${artifacts})", name)
		}
		p.variable = name
		rest = rest[end+1:]
		if rest != "" && rest[0] != '/' {
			return p, fmt.Errorf("${%s} must be followed by / or end the pattern", name)
		}
	case strings.HasPrefix(rest, "/"):
	default:
		return p, errors.New("pattern must be absolute: start with / or with ${workdir}, ${home} or ${artifacts}")
	}
	if strings.Contains(rest, "${") {
		return p, errors.New("a ${variable} may only start a pattern")
	}
	for _, e := range strings.Split(rest, "/") {
		switch {
		case e == "" || e == ".":
		case e == "..":
			return p, errors.New(`".." is not allowed in a pattern`)
		case e == "**":
			p.elems = append(p.elems, elem{kind: elemAny})
		case strings.Contains(e, "**"):
			return p, fmt.Errorf("%q: ** must be a whole path element", e)
		case strings.ContainsAny(e, "*?"):
			p.elems = append(p.elems, elem{kind: elemGlob, text: e})
		default:
			p.elems = append(p.elems, elem{kind: elemLiteral, text: e})
		}
	}
	return p, nil
}

// expand returns the pattern's elements with its variable, if any, replaced by the
// literal elements of its value.
func (p pathPattern) expand(v Vars) ([]elem, error) {
	if p.variable == "" {
		return p.elems, nil
	}
	val, err := v.lookup(p.variable)
	if err != nil {
		return nil, err
	}
	names := splitPath(val)
	out := make([]elem, 0, len(names)+len(p.elems))
	for _, n := range names {
		out = append(out, elem{kind: elemLiteral, text: n})
	}
	return append(out, p.elems...), nil
}

// splitPath splits an absolute path into its non-empty elements; "/" has none.
func splitPath(p string) []string {
	return strings.FieldsFunc(filepath.ToSlash(p), func(r rune) bool { return r == '/' })
}

// literalPrefix returns how many leading elements of elems are literal.
func literalPrefix(elems []elem) int {
	for i, e := range elems {
		if e.kind != elemLiteral {
			return i
		}
	}
	return len(elems)
}

// matchElems reports whether the path elements names match the pattern elements pat.
// It runs in O(len(pat)·len(names)) however many ** the pattern has.
func matchElems(pat []elem, names []string) bool {
	// reach[j] says that the pattern elements seen so far can match names[:j].
	// The two rows live on the stack for paths of up to 31 elements: this runs
	// for every rule on every path a data mount holds.
	var bufA, bufB [32]bool
	n := len(names) + 1
	var reach, next []bool
	if n <= len(bufA) {
		reach, next = bufA[:n], bufB[:n]
	} else {
		reach, next = make([]bool, n), make([]bool, n)
	}
	reach[0] = true
	for _, e := range pat {
		clear(next)
		alive := false
		for j := 0; j < n; j++ {
			if !reach[j] {
				continue
			}
			if e.kind == elemAny {
				for k := j; k < n; k++ {
					next[k] = true
				}
				alive = true
				break
			}
			if j < len(names) && e.matches(names[j]) {
				next[j+1] = true
				alive = true
			}
		}
		if !alive {
			return false
		}
		reach, next = next, reach
	}
	return reach[n-1]
}

// matchWildcard reports whether s matches pattern, in which * matches any run of
// characters and ? exactly one character (one UTF-8 sequence, or one byte of invalid
// UTF-8). Everything else matches itself byte for byte. It is the usual linear
// backtracking algorithm: on a mismatch, the last * absorbs one more character.
func matchWildcard(pattern, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(pattern) {
			switch c := pattern[pi]; {
			case c == '*':
				star, mark = pi, si
				pi++
				continue
			case c == '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				pi++
				si += n
				continue
			case c == s[si]:
				pi++
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[mark:])
		mark += n
		pi, si = star+1, mark
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}
