package tokens_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/tokens"
)

// sessions is a set of existing sessions, for Options.Exists.
type sessions struct{ m sync.Map }

func (s *sessions) exists(id string) bool { _, ok := s.m.Load(id); return ok }
func (s *sessions) add(id string)         { s.m.Store(id, true) }

func open(t *testing.T, dir string, o tokens.Options) *tokens.Store {
	t.Helper()
	st, err := tokens.Open(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestScopePatterns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patterns []string
		match    []string
		miss     []string
	}{
		{[]string{"a1"}, []string{"a1"}, []string{"a10", "a", "A1", "a1-x"}},
		{[]string{"a1-*"}, []string{"a1-", "a1-x", "a1-x-y"}, []string{"a1", "a1x", "a10", "b1-x"}},
		{[]string{"a1*"}, []string{"a1", "a1x", "a1-x", "a10"}, []string{"a", "b1"}},
		{[]string{"*"}, []string{"x", "any-id_1"}, []string{"", "bad/id", "a b", strings.Repeat("x", 65)}},
		{[]string{"a*", "a1-*", "a1"}, []string{"a", "a1", "a1-z"}, []string{"b"}}, // overlapping
	} {
		sc := tokens.Scope{Sessions: tc.patterns}
		require.NoError(t, sc.Validate(), tc.patterns)
		for _, id := range tc.match {
			assert.True(t, sc.Matches(id), "%v should match %q", tc.patterns, id)
		}
		for _, id := range tc.miss {
			assert.False(t, sc.Matches(id), "%v should not match %q", tc.patterns, id)
		}
	}
	for _, bad := range [][]string{nil, {}, {""}, {"**"}, {"a/*"}, {"*a"}, {"a b"}, {strings.Repeat("a", 65)}} {
		sc := tokens.Scope{Sessions: bad}
		assert.ErrorIs(t, sc.Validate(), api.ErrInvalidRequest, "%q", bad)
	}
	sc := tokens.Scope{Sessions: []string{"a"}, Ops: []tokens.Op{"sudo"}}
	assert.ErrorIs(t, sc.Validate(), api.ErrInvalidRequest)
	sc = tokens.Scope{Sessions: []string{"a"}, Ops: []tokens.Op{tokens.OpWatch}}
	require.NoError(t, sc.Validate())
	assert.True(t, sc.Allows(tokens.OpWatch))
	assert.False(t, sc.Allows(tokens.OpExecute))
	sc = tokens.Scope{Sessions: []string{"a"}}
	require.NoError(t, sc.Validate())
	assert.Equal(t, tokens.AllOps, sc.Ops, "no ops is every op")
}

func TestMintAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := open(t, dir, tokens.Options{})
	tok, secret, err := st.Mint("analyst-1", tokens.Scope{Sessions: []string{"a1", "a1-*"}}, time.Hour)
	require.NoError(t, err)
	assert.Len(t, secret, 64)
	assert.True(t, tokens.LooksScoped(secret))
	p, err := st.Authenticate(secret)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, p.ID())
	assert.False(t, p.IsAdmin())

	// The secret is nowhere at rest.
	for _, name := range []string{"tokens.json", "tokens.key"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.NotContains(t, string(b), secret[20:], name)
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}

	// Malformed, truncated, wrong-case, very long, another id: unknown.
	for _, bad := range []string{"", "x", secret[:len(secret)-1], secret + "A", strings.ToUpper(secret),
		strings.Replace(secret, "kbt_", "KBT_", 1), strings.Repeat("a", 1<<16), secret[:4] + strings.Repeat("0", 16) + secret[20:],
		secret[:len(secret)-2] + "!!", secret[:len(secret)-1] + string(rune(secret[len(secret)-1])^1)} {
		_, err := st.Authenticate(bad)
		assert.ErrorIs(t, err, tokens.ErrUnknown, "%.40q", bad)
	}

	// Survives a restart; the last use is kept.
	require.NoError(t, st.Close())
	st2 := open(t, dir, tokens.Options{})
	p, err = st2.Authenticate(secret)
	require.NoError(t, err)
	assert.Equal(t, "analyst-1", p.Name())
	list := st2.List()
	require.Len(t, list, 1)
	assert.False(t, list[0].LastUsed.IsZero())

	// Revoked: unknown at once, and its context says why.
	_, _, err = st2.Revoke(tok.ID)
	require.NoError(t, err)
	<-p.Revoked().Done()
	assert.Contains(t, context.Cause(p.Revoked()).Error(), "was revoked")
	_, err = st2.Authenticate(secret)
	assert.ErrorIs(t, err, tokens.ErrUnknown)
	_, _, err = st2.Revoke(tok.ID)
	assert.ErrorIs(t, err, api.ErrNotFound)
}

func TestExpired(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	st := open(t, t.TempDir(), tokens.Options{Now: func() time.Time { return clock() }})
	_, secret, err := st.Mint("short", tokens.Scope{Sessions: []string{"*"}}, time.Minute)
	require.NoError(t, err)
	_, err = st.Authenticate(secret)
	require.NoError(t, err)
	now = now.Add(2 * time.Minute)
	_, err = st.Authenticate(secret)
	assert.ErrorIs(t, err, tokens.ErrExpired)
	assert.Contains(t, err.Error(), "expired")
}

// TestTokenCap: minting is bounded, and the bound is told.
func TestTokenCap(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir(), tokens.Options{MaxTokens: 50})
	n := 0
	var err error
	for range 10_000 {
		if _, _, err = st.Mint("t", tokens.Scope{Sessions: []string{"*"}}, 0); err != nil {
			break
		}
		n++
	}
	assert.Equal(t, 50, n)
	assert.ErrorIs(t, err, api.ErrTooManyTokens)
	assert.Contains(t, err.Error(), "at most 50")
	code, status := api.CodeOf(err)
	assert.Equal(t, api.CodeTooManyTokens, code)
	assert.Equal(t, 429, status)
}

// TestTamperedFile: a token file edited while serve is down never grants a
// forged scope: a record that does not check is dropped, with a log line; a
// file that does not parse stops the store from opening.
func TestTamperedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ss := &sessions{}
	st := open(t, dir, tokens.Options{Exists: ss.exists})
	_, secretA, err := st.Mint("a", tokens.Scope{Sessions: []string{"a1"}}, 0)
	require.NoError(t, err)
	_, secretB, err := st.Mint("b", tokens.Scope{Sessions: []string{"b1"}}, 0)
	require.NoError(t, err)
	pb, err := st.Authenticate(secretB)
	require.NoError(t, err)
	_, err = st.Claim(pb, "b1")
	require.NoError(t, err)
	ss.add("b1")
	require.NoError(t, st.Close())

	path := filepath.Join(dir, tokens.FileName)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var f map[string]any
	require.NoError(t, json.Unmarshal(raw, &f))
	// Widen a's scope to every session, and give b's session to a.
	var ta map[string]any
	for _, tk := range f["tokens"].([]any) {
		if tk.(map[string]any)["name"] == "a" {
			ta = tk.(map[string]any)
		}
	}
	ta["scope"].(map[string]any)["sessions"] = []string{"*"}
	owners := f["owners"].([]any)
	owners[0].(map[string]any)["token"] = ta["id"]
	edited, err := json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, edited, 0o600))

	var logs bytes.Buffer
	st2 := open(t, dir, tokens.Options{Exists: ss.exists, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, err = st2.Authenticate(secretA)
	assert.ErrorIs(t, err, tokens.ErrUnknown, "the widened token is dropped")
	p, err := st2.Authenticate(secretB)
	require.NoError(t, err, "the untouched token stays")
	assert.Equal(t, "", st2.Owner("b1"), "the moved owner record is dropped")
	assert.NoError(t, st2.Access(p, "b1"))
	assert.Contains(t, logs.String(), "dropped a token record")
	assert.Contains(t, logs.String(), "dropped an owner record")

	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"tokens":[{`), 0o600))
	_, err = tokens.Open(dir, tokens.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "will not start")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.key"), []byte("short"), 0o600))
	_, err = tokens.Open(dir, tokens.Options{})
	require.Error(t, err)
}

// TestOwnership: a session belongs to the token that created it; another
// token whose patterns match it still cannot reach it; the admin's sessions
// are any matching token's; max_sessions holds under a race of 50 creations.
func TestOwnership(t *testing.T) {
	t.Parallel()
	ss := &sessions{}
	st := open(t, t.TempDir(), tokens.Options{Exists: ss.exists})
	mint := func(name string, sc tokens.Scope) *tokens.Principal {
		_, secret, err := st.Mint(name, sc, 0)
		require.NoError(t, err)
		p, err := st.Authenticate(secret)
		require.NoError(t, err)
		return p
	}
	a := mint("a", tokens.Scope{Sessions: []string{"*"}, MaxSessions: 3})
	b := mint("b", tokens.Scope{Sessions: []string{"*"}})

	claimed, err := st.Claim(a, "shared")
	require.NoError(t, err)
	assert.True(t, claimed)
	ss.add("shared")
	st.Settle("shared")
	assert.NoError(t, st.Access(a, "shared"))
	err = st.Access(b, "shared")
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Equal(t, `no such session "shared": not found`, err.Error(), "worded as a missing session")
	_, err = st.Claim(b, "shared")
	assert.ErrorIs(t, err, api.ErrNotFound)
	// A pending claim (no session yet) is held too.
	_, err = st.Claim(a, "pending")
	require.NoError(t, err)
	_, err = st.Claim(b, "pending")
	assert.ErrorIs(t, err, api.ErrNotFound)
	st.Settle("pending")

	ss.add("admins")
	assert.NoError(t, st.Access(b, "admins"), "the admin's session: any token whose patterns match")
	claimed, err = st.Claim(b, "admins")
	require.NoError(t, err)
	assert.False(t, claimed, "touching the admin's session does not take it")

	// 50 creations at once against max_sessions 3 (one owned already).
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "race-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			if _, err := st.Claim(a, id); err == nil {
				ok.Add(1)
				ss.add(id)
				st.Settle(id)
			} else {
				assert.ErrorIs(t, err, api.ErrTooManySessions)
				assert.Contains(t, err.Error(), "at most 3")
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2, ok.Load())
	assert.EqualValues(t, 48, refused.Load())
	assert.Equal(t, 3, st.OwnedBy(a.ID()))

	// A closed session keeps its owner (what it left stays a's), and no
	// longer counts against max_sessions.
	ss.m.Delete("shared")
	assert.ErrorIs(t, st.Access(b, "shared"), api.ErrNotFound)
	_, err = st.Claim(b, "shared")
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.Equal(t, 2, st.OwnedBy(a.ID()))
	claimed, err = st.Claim(a, "one-more")
	require.NoError(t, err)
	assert.True(t, claimed)
}

func TestRate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	st := open(t, t.TempDir(), tokens.Options{Now: func() time.Time { return now }})
	_, secret, err := st.Mint("r", tokens.Scope{Sessions: []string{"*"}, RatePerMinute: 3}, 0)
	require.NoError(t, err)
	p, err := st.Authenticate(secret)
	require.NoError(t, err)
	for range 3 {
		_, ok := st.Allow(p)
		require.True(t, ok)
	}
	wait, ok := st.Allow(p)
	assert.False(t, ok)
	assert.InDelta(t, 20*time.Second, wait, float64(time.Second))
	now = now.Add(21 * time.Second)
	_, ok = st.Allow(p)
	assert.True(t, ok)
	_, ok = st.Allow(tokens.Admin)
	assert.True(t, ok)
}

// TestWrongTokenTiming: a wrong secret for a token that exists costs what a
// secret naming no token does (both hash and compare once).
func TestWrongTokenTiming(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir(), tokens.Options{})
	_, secret, err := st.Mint("t", tokens.Scope{Sessions: []string{"*"}}, 0)
	require.NoError(t, err)
	wrong := secret[:len(secret)-4] + "AAAA"
	missing := secret[:4] + "0123456789abcdef" + secret[20:]
	block := func(s string) time.Duration {
		const n = 200
		start := time.Now()
		for range n {
			_, _ = st.Authenticate(s)
		}
		return time.Since(start) / n
	}
	// Interleaved blocks, the fastest of each kind: the machine's other work
	// only ever slows a block down.
	var w, m time.Duration
	for i := range 20 {
		bw, bm := block(wrong), block(missing)
		if i == 0 || bw < w {
			w = bw
		}
		if i == 0 || bm < m {
			m = bm
		}
	}
	assert.InDelta(t, 1, float64(w)/float64(m), 0.5, "wrong %s, missing %s per check", w, m)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
