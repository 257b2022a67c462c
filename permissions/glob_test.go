package permissions

import (
	"strings"
	"testing"
)

func TestMatchWildcard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"filesystem.read", "filesystem.read", true},
		{"filesystem.read", "filesystem.reads", false},
		{"filesystem.*", "filesystem.read", true},
		{"filesystem.*", "filesystem.", true},
		{"filesystem.*", "filesystemXread", false},
		{"*", "", true},
		{"*", "python.exec.stateful", true},
		{"", "", true},
		{"", "x", false},
		{"*.pem", "server.pem", true},
		{"*.pem", ".pem", true},
		{"*.pem", "server.pem.bak", false},
		{"id_rsa*", "id_rsa", true},
		{"id_rsa*", "id_rsa.pub", true},
		{"id_rsa*", "my_id_rsa", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b", "abab", true},
		{"?", "é", true},
		{"?", "ab", false},
		{"??", "é", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*é", "xxé", true},
		{"**", "anything", true},
		{"[ab]", "a", false},
		{"[ab]", "[ab]", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.s, func(t *testing.T) {
			t.Parallel()
			if got := matchWildcard(tt.pattern, tt.s); got != tt.want {
				t.Errorf("matchWildcard(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	vars := Vars{Workdir: "/work/dir", Home: "/home/u*?", Artifacts: "/art"}
	tests := []struct {
		pattern, target string
		want            bool
	}{
		{"/a/**", "/a", true},
		{"/a/**", "/a/b", true},
		{"/a/**", "/a/b/c/d", true},
		{"/a/**", "/ab", false},
		{"/a/**", "/", false},
		{"/a", "/a", true},
		{"/a", "/a/b", false},
		{"/a/", "/a", true},
		{"/a/./b", "/a/b", true},
		{"//a//b", "/a/b", true},
		{"/**", "/", true},
		{"/**", "/x/y", true},
		{"/", "/", true},
		{"/", "/x", false},
		{"/a/*", "/a/b", true},
		{"/a/*", "/a", false},
		{"/a/*", "/a/b/c", false},
		{"/a/*/c", "/a/b/c", true},
		{"/a/*/c", "/a/b/x/c", false},
		{"/a/**/c", "/a/c", true},
		{"/a/**/c", "/a/b/x/c", true},
		{"/a/**/c", "/a/b/x/cc", false},
		{"/**/.ssh/**", "/home/u/.ssh/id_rsa", true},
		{"/**/.ssh/**", "/.ssh", true},
		{"/**/.ssh/**", "/home/u/ssh/id_rsa", false},
		{"/**/*.pem", "/etc/ssl/a.pem", true},
		{"/**/*.pem", "/a.pem", true},
		{"/**/*.pem", "/a.pem/x", false},
		{"/**/**/x", "/x", true},
		{"/**/**/x", "/a/b/c/x", true},
		{"/a/?", "/a/b", true},
		{"/a/?", "/a/bc", false},
		{"/a/b?d", "/a/b/d", false},
		{"${workdir}/**", "/work/dir", true},
		{"${workdir}/**", "/work/dir/f.csv", true},
		{"${workdir}/**", "/work/dirt/f.csv", false},
		{"${workdir}", "/work/dir", true},
		{"${artifacts}/*/x", "/art/s1/x", true},
		// A variable's value is literal even when it contains glob characters.
		{"${home}/.ssh/**", "/home/u*?/.ssh/id", true},
		{"${home}/.ssh/**", "/home/uXY/.ssh/id", false},
		{"/run/user/*/docker.sock", "/run/user/1000/docker.sock", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.target, func(t *testing.T) {
			t.Parallel()
			p, err := parsePattern(tt.pattern)
			if err != nil {
				t.Fatalf("parsePattern(%q): %v", tt.pattern, err)
			}
			elems, err := p.expand(vars)
			if err != nil {
				t.Fatalf("expand(%q): %v", tt.pattern, err)
			}
			if got := matchElems(elems, splitPath(tt.target)); got != tt.want {
				t.Errorf("%q matches %q = %v, want %v", tt.pattern, tt.target, got, tt.want)
			}
		})
	}
}

func TestParsePatternErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, wantErr string
	}{
		{"data/**", "must be absolute"},
		{"**/*.pem", "must be absolute"},
		{"~/.ssh", "must be absolute"},
		{"$HOME/.ssh", "must be absolute"},
		{"${home", "unterminated"},
		{"${user}/x", "unknown variable ${user}"},
		{"${home}x", "must be followed by /"},
		{"/data/${home}", "may only start"},
		{"/a/../b", `".."`},
		{"/a/b**", "whole path element"},
		{"/a/***/b", "whole path element"},
		{"/a\x00b", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			_, err := parsePattern(tt.pattern)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parsePattern(%q) error = %v, want it to contain %q", tt.pattern, err, tt.wantErr)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		vars    Vars
		wantErr string
	}{
		{"unset", "${home}/.ssh/**", Vars{}, "${home} is not set"},
		{"relative", "${workdir}/**", Vars{Workdir: "work"}, "not an absolute path"},
		{"other var unset", "${artifacts}/**", Vars{Workdir: "/w", Home: "/h"}, "${artifacts} is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := parsePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.expand(tt.vars)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("expand error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
