// Package docs holds kernelbox's reference pages (Markdown) and a test that their
// links resolve. Start reading at README.md.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// link matches a Markdown link or image: [text](target) or ![alt](target).
var link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// pages returns the Markdown files the test checks: the README and every page
// under docs/ and examples/.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join("..", "README.md")}
	for _, dir := range []string{".", filepath.Join("..", "examples")} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".md") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// prose returns the lines of a Markdown file outside fenced code blocks, with
// inline code spans blanked, so that code is never read as a link.
func prose(text string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		out = append(out, regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "``"))
	}
	return out
}

// anchors returns the fragment ids GitHub gives a Markdown file's headings.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		id := slug(h)
		if n := seen[id]; n > 0 {
			ids[id+"-"+strconv.Itoa(n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// slug is GitHub's heading id: lower case, punctuation but '-' and '_' dropped,
// spaces made '-'. Inline code keeps its text; link syntax keeps the link's text.
func slug(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinksResolve checks every relative link of the README and the docs: its file
// exists, and a fragment names a heading of the Markdown file it points into.
func TestLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, l := range prose(string(b)) {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
					continue // http:, https:, mailto: are not this test's
				}
				file, frag, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %q: %v", page, n+1, target, err)
						continue
					}
				}
				checked++
				if frag == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				ids, ok := cache[path]
				if !ok {
					c, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					ids = anchors(string(c))
					cache[path] = ids
				}
				if !ids[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", page, n+1, target, path, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links checked: the test is not reading the pages", checked)
	}
}

// TestSlug pins the heading ids the check relies on.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Backends and their security": "backends-and-their-security",
		"Scale-out on Docker Swarm":   "scale-out-on-docker-swarm",
		"Using kernelbox from an MCP client (Claude Desktop, Claude Code, ...)": "using-kernelbox-from-an-mcp-client-claude-desktop-claude-code-",
		"`kernelbox run`, over HTTP": "kernelbox-run-over-http",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
