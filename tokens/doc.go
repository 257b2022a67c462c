// Package tokens keeps kernelbox's scoped tokens: keys an operator mints with
// the admin token and hands to one agent each, each limited to some sessions
// (exact ids or prefixes), templates and operations, with a session cap, a call
// rate and an expiry (see docs/security.md, "Scoped tokens").
//
// Start reading at [Store]: [Open] loads the tokens and the sessions' owners
// from a 0600 file under the workspace; [Store.Authenticate] turns a bearer
// secret into a [Principal]; [Store.Access] and [Store.Claim] say whether that
// principal may touch or create a session. Secrets are never kept: only an
// HMAC-SHA256 of each under a per-workspace key, compared in constant time, and
// every record on disk carries a MAC under the same key, so a record edited
// while kernelbox was down (a widened scope, a moved owner) is dropped with a
// log line rather than believed.
//
// The package decides nothing about HTTP: httpapi's route table says which
// operations a route needs and its guard asks the Store.
package tokens
