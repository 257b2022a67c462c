package jupyter

import (
	"context"
	"crypto/tls"
	"net"
)

// Endpoint says how to reach one Jupyter server (Jupyter Server, Kernel Gateway or
// Enterprise Gateway). It is plain data, safe to copy
// (Dial, when set, must be safe for concurrent use).
type Endpoint struct {
	// URL is the server's base URL, for example "http://127.0.0.1:8888" or
	// "https://gateway.example/prefix". With Socket set, only its path is used and the
	// host should be a loopback name (Jupyter Server rejects other Host headers).
	// Defaults to "http://localhost" when Socket is set.
	URL string

	// Token is sent as "Authorization: token <Token>" on every request when non-empty.
	Token string

	// Socket, when set, is the path of a unix socket that every HTTP and WebSocket
	// connection dials instead of URL's host and port.
	Socket string

	// Dial, when set, makes every HTTP and WebSocket connection instead of URL's
	// host and port or Socket: for a server reached through connections handed to
	// kernelbox (the docker backend's relay under gVisor). URL defaults as for
	// Socket.
	Dial func(ctx context.Context) (net.Conn, error)

	// TLS configures https URLs. Nil means Go's defaults.
	TLS *tls.Config
}
