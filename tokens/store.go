package tokens

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/internal/statefile"
)

// Errors of Authenticate; both mean 401 to a client.
var (
	// ErrUnknown: the secret is not a live token's (malformed, wrong, revoked).
	ErrUnknown = errors.New("unknown token")
	// ErrExpired: the token's time is over.
	ErrExpired = errors.New("token expired")
)

// ErrTooManyTokens: minting another token would pass Options.MaxTokens.
var ErrTooManyTokens = api.ErrTooManyTokens

// Token is a scoped token as listed: never its secret.
type Token struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Scope   Scope     `json:"scope"`
	Created time.Time `json:"created"`
	// Expires is zero for a token without a TTL.
	Expires  time.Time `json:"expires,omitzero"`
	LastUsed time.Time `json:"last_used,omitzero"`
}

// Options configures a Store. The zero value works.
type Options struct {
	// MaxTokens caps the tokens kept (expired ones count until revoked).
	// Defaults to 1000.
	MaxTokens int
	// Exists reports whether a session exists (live or hibernated): an owner
	// record of a session that does not is stale. Defaults to none existing.
	Exists func(id string) bool
	// Logger receives the records dropped at load and the revocations.
	// Defaults to discarding them.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// DefaultMaxTokens is Options.MaxTokens's default.
const DefaultMaxTokens = 1000

// File names in the store's directory.
const (
	FileName = "tokens.json"
	keyName  = "tokens.key"
	maxFile  = 64 << 20
)

// Store keeps the scoped tokens and the sessions' owners. It is safe for
// concurrent use.
type Store struct {
	o    Options
	path string
	key  keyed

	mu     sync.Mutex
	tokens map[string]*entry
	owners map[string]owner // by session id
	dirty  bool             // last-used times not yet written
}

// entry is a live token.
type entry struct {
	Token
	hash   string
	done   context.Context
	revoke context.CancelCauseFunc
	bucket bucket   // rate.go
	calls  []string // the latest calls it started, for revocation
}

// Open loads the store kept in dir (made 0700 if missing): its key (made on
// first use) and its tokens and owners. A file that cannot be read as a whole
// is an error (serve refuses to start); a record whose MAC does not match is
// dropped with a log line.
func Open(dir string, o Options) (*Store, error) {
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.Exists == nil {
		o.Exists = func(string) bool { return false }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	key, err := loadKey(filepath.Join(dir, keyName))
	if err != nil {
		return nil, err
	}
	s := &Store{o: o, path: filepath.Join(dir, FileName), key: key, tokens: map[string]*entry{}, owners: map[string]owner{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadKey reads the store's key, making it on first use.
func loadKey(path string) (keyed, error) {
	b, err := statefile.Read(path, 1024)
	if errors.Is(err, fs.ErrNotExist) {
		b = make([]byte, 32)
		_, _ = rand.Read(b)
		if err := statefile.Write(path, b, true); err != nil {
			return nil, fmt.Errorf("tokens: write key: %w", err)
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokens: read key: %w", err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("tokens: key %s is %d bytes, not 32: it was changed outside kernelbox; remove it and %s to revoke every scoped token", path, len(b), FileName)
	}
	return b, nil
}

// file is the store's file.
type file struct {
	Version int          `json:"version"`
	Tokens  []fileToken  `json:"tokens"`
	Owners  []ownerEntry `json:"owners"`
}

// fileToken is one token on disk: its record, the HMAC of its secret, and the
// MAC of both.
type fileToken struct {
	Token
	Hash string `json:"hash"`
	MAC  string `json:"mac,omitempty"`
}

const fileVersion = 1

// load reads the file, if any.
func (s *Store) load() error {
	b, err := statefile.Read(s.path, maxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil || f.Version != fileVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", f.Version, fileVersion)
		}
		return fmt.Errorf("tokens: %s cannot be read (%v): kernelbox will not start on a token file it cannot check; restore it, or remove it to revoke every scoped token", s.path, err)
	}
	for _, ft := range f.Tokens {
		mac := ft.MAC
		ft.MAC = ""
		var sc Scope = ft.Scope
		if !equal(mac, s.key.seal("token", ft)) || len(s.tokens) >= s.o.MaxTokens || sc.Validate() != nil {
			s.o.Logger.Warn("tokens: dropped a token record that does not check (edited outside kernelbox?)", "file", s.path, "token_id", clip(ft.ID))
			continue
		}
		s.tokens[ft.ID] = s.newEntry(ft.Token, ft.Hash)
	}
	for _, oe := range f.Owners {
		mac := oe.MAC
		oe.MAC = ""
		if !equal(mac, s.key.seal("owner", oe)) || !api.ValidSessionID(oe.Session) {
			s.o.Logger.Warn("tokens: dropped an owner record that does not check (edited outside kernelbox?)", "file", s.path, "session", clip(oe.Session))
			continue
		}
		// The owner may be a revoked token: its sessions stay out of the
		// other tokens' reach.
		s.owners[oe.Session] = owner{token: oe.Token, since: oe.Since, made: oe.Made}
	}
	return nil
}

// newEntry makes a live entry for t.
func (s *Store) newEntry(t Token, hash string) *entry {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &entry{Token: t, hash: hash, done: ctx, revoke: cancel}
}

// saveLocked writes the file whole (s.mu held).
func (s *Store) saveLocked() error {
	f := file{Version: fileVersion, Tokens: []fileToken{}, Owners: []ownerEntry{}}
	for _, e := range s.tokens {
		ft := fileToken{Token: e.Token, Hash: e.hash}
		ft.MAC = s.key.seal("token", ft)
		f.Tokens = append(f.Tokens, ft)
	}
	slices.SortFunc(f.Tokens, func(a, b fileToken) int { return a.Created.Compare(b.Created) })
	for id, o := range s.owners {
		oe := ownerEntry{Session: id, Token: o.token, Since: o.since, Made: o.made}
		oe.MAC = s.key.seal("owner", oe)
		f.Owners = append(f.Owners, oe)
	}
	slices.SortFunc(f.Owners, func(a, b ownerEntry) int { return strings.Compare(a.Session, b.Session) })
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if err := statefile.Write(s.path, b, true); err != nil {
		return fmt.Errorf("tokens: write %s: %w", s.path, err)
	}
	s.dirty = false
	return nil
}

// Mint makes a token named name with scope sc, living ttl (0: until revoked),
// and returns it with its secret: the only time the secret is given out.
func (s *Store) Mint(name string, sc Scope, ttl time.Duration) (Token, string, error) {
	if name == "" || len(name) > MaxNameLen || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Token{}, "", fmt.Errorf("%w: token name: 1 to %d printable characters", api.ErrInvalidRequest, MaxNameLen)
	}
	if ttl < 0 {
		return Token{}, "", fmt.Errorf("%w: ttl_seconds must not be negative", api.ErrInvalidRequest)
	}
	if err := sc.Validate(); err != nil {
		return Token{}, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tokens) >= s.o.MaxTokens {
		return Token{}, "", fmt.Errorf("%w: the server keeps at most %d scoped tokens (revoke some with DELETE /v1/tokens/{id})", ErrTooManyTokens, s.o.MaxTokens)
	}
	now := s.o.Now().UTC().Truncate(time.Second)
	t := Token{ID: newID(), Name: name, Scope: sc, Created: now}
	if ttl > 0 {
		t.Expires = now.Add(ttl)
	}
	secret := newSecret(t.ID)
	s.tokens[t.ID] = s.newEntry(t, s.key.hash(secret))
	if err := s.saveLocked(); err != nil {
		delete(s.tokens, t.ID)
		return Token{}, "", err
	}
	return t, secret, nil
}

// List returns the tokens, oldest first.
func (s *Store) List() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Token, 0, len(s.tokens))
	for _, e := range s.tokens {
		out = append(out, e.Token)
	}
	slices.SortFunc(out, func(a, b Token) int { return a.Created.Compare(b.Created) })
	return out
}

// Revoke deletes the token id at once: its requests in flight see their
// Principal's Revoked context end. It returns the token and the calls it
// started that the store remembers, for the caller to cancel; the token's
// sessions stay (the admin closes them), owned by nobody that can log in.
func (s *Store) Revoke(id string) (Token, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tokens[id]
	if e == nil {
		return Token{}, nil, fmt.Errorf("token %q: %w", clip(id), api.ErrNotFound)
	}
	delete(s.tokens, id)
	if err := s.saveLocked(); err != nil {
		s.tokens[id] = e
		return Token{}, nil, err
	}
	e.revoke(fmt.Errorf("token %q (%s) was revoked", e.Name, e.ID))
	s.o.Logger.Info("token revoked", "token_id", e.ID, "name", e.Name)
	return e.Token, slices.Clone(e.calls), nil
}

// dummyHash is compared against when a secret names no token, so that an
// unknown id costs what a wrong secret does.
const dummyHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Authenticate returns the principal of a scoped token's secret:
// ErrUnknown when it is not a live token's, ErrExpired when its time is over.
// It costs the same whether the id exists or not.
func (s *Store) Authenticate(secret string) (*Principal, error) {
	id, ok := parseSecret(secret)
	h := s.key.hash(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tokens[id]
	want := dummyHash
	if e != nil {
		want = e.hash
	}
	if !equal(h, want) || !ok || e == nil {
		return nil, ErrUnknown
	}
	now := s.o.Now()
	if e.expired(now) {
		return nil, fmt.Errorf("%w at %s", ErrExpired, e.Expires.Format(time.RFC3339))
	}
	e.LastUsed = now.UTC().Truncate(time.Second)
	s.dirty = true
	return &Principal{tok: e.Token, done: e.done}, nil
}

// Close writes what is not written yet (the last-used times).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dirty {
		return nil
	}
	return s.saveLocked()
}
