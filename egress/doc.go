// Package egress is kernelbox's own egress proxy and the policy it enforces: which
// names, ports and address ranges a session's kernel may reach. Start reading at
// [Policy] (what an operator writes in a template's "network" setting), then
// [Policy.CheckName] and [Policy.CheckAddr] (the pure decision functions, deny by
// default) and [Proxy] (the server that asks them for every connection).
//
// It is a top-level package, not internal/, because its [Policy] is part of the
// public shape of a template (templates, executor and the API show it to clients
// and models), and because an embedding program may run a [Proxy] of its own in
// front of any session. Nothing in it knows about Docker or sessions' placement:
// the docker backend gives it a listener (a unix socket inside the container's
// /tmp) and a callback, and turns its [Record]s into a call's network notes.
//
// The proxy speaks HTTP CONNECT, with TLS passed through untouched (no interception,
// no CA to install; the ClientHello, gathered whole from however many records carry
// it, is only read, to refuse one that names another host than the CONNECT; plain
// HTTP through a tunnel is refused), and plain HTTP with absolute URIs, one request
// per client connection. Every connection counts against its session's max_conns
// (and an optional [Limiter] shared by all sessions) from its accept, so that idle
// connections cannot exhaust the server's descriptors, and a session's max_bytes is
// a [Budget] its successive proxies share. It resolves names itself and dials exactly the
// address it checked, so a name cannot resolve to an allowed address at check time
// and to another at connect time. Loopback, private, link-local (the cloud
// metadata service), CGNAT, multicast, unspecified and reserved addresses, and
// their IPv6 forms (IPv4-mapped and the translation prefixes included), are refused
// unless the operator allows a CIDR holding them; IP literals are refused unless an
// allow entry names the address, and non-canonical forms (decimal, octal, hex,
// short dotted) are always refused.
//
// The one exception to "TLS untouched" is a template's secrets ([SecretRule],
// [CompileSecrets], [Rules.WithSecrets]): a CONNECT to a host a secret rule
// names is terminated with a certificate from a [CA] kept in memory
// ([Intercept]), and its HTTP/1.1 requests, checked to stay on that host, get
// the credential on the way out (intercept.go, secret_apply.go, sigv4.go).
//
// A refusal is an HTTP 403 with a plain-text body naming the rule, so code in the
// kernel fails fast with a reason instead of a timeout. Every connection, allowed
// or not, ends in one [Record] handed to [Options.OnRecord].
//
// Known limits: the proxy sees names, not content. Domain fronting (a TLS
// connection to an allowed name on a shared CDN whose encrypted HTTP Host names
// another site behind the same CDN) reaches that other site; an allowed host that
// relays (an open proxy, a git host's raw content) carries whatever it relays.
package egress
