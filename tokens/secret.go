package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// A secret is "kbt_" + the token's id (16 hex digits) + "_" + 32 random bytes
// in unpadded base64url (43 characters): 64 characters in all. The id lets the
// store find the one record to compare against; only the HMAC of the whole
// secret under the store's key is kept.
const (
	secretPrefix = "kbt_"
	idLen        = 16
	randLen      = 43
	secretLen    = len(secretPrefix) + idLen + 1 + randLen
)

// newID returns a fresh token id.
func newID() string {
	b := make([]byte, idLen/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// newSecret returns a fresh secret for the token id.
func newSecret(id string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return secretPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(b)
}

// LooksScoped reports whether s has the form of a scoped token's secret, for
// clients that say which kind of token they hold.
func LooksScoped(s string) bool {
	_, ok := parseSecret(s)
	return ok
}

// parseSecret returns the token id a secret names, and whether it has the
// form of one at all (length, prefix, hex id, base64url tail).
func parseSecret(s string) (string, bool) {
	if len(s) != secretLen || !strings.HasPrefix(s, secretPrefix) || s[len(secretPrefix)+idLen] != '_' {
		return "", false
	}
	id := s[len(secretPrefix) : len(secretPrefix)+idLen]
	if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
		return "", false
	}
	if _, err := base64.RawURLEncoding.DecodeString(s[len(secretPrefix)+idLen+1:]); err != nil {
		return "", false
	}
	return id, true
}

// keyed is the store's HMAC key.
type keyed []byte

// hash is the HMAC of a secret: what the store keeps instead of it.
func (k keyed) hash(secret string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("secret\x00" + secret))
	return hex.EncodeToString(m.Sum(nil))
}

// equal compares two hashes in constant time.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// seal returns the MAC of a record (kind names what it is, so that a record of
// one kind is never taken for another): its JSON without its MAC, under the key.
func (k keyed) seal(kind string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "" // never matches: a record that cannot be encoded is never believed
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(kind + "\x00"))
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}
