// Package jupyterapi serves kernelbox's sessions as Jupyter kernels: the kernel
// gateway API that Jupyter Server's and Notebook's --gateway-url client speaks
// (GET /api, /api/kernelspecs, /api/kernels, and the WebSocket
// /api/kernels/{id}/channels in the legacy JSON protocol or, when the client
// offers it, the binary v1.kernel.websocket.jupyter.org subprotocol: wire.go).
//
// Start reading at [New] and [Gateway.Routes]: the routes are mounted as rows of
// httpapi's route table, behind its one guard (token, Host, cross-site
// requests, body limits), so this package never checks a token itself. A kernel
// is a kernelbox session whose id is the kernel id; rest.go answers the REST
// routes, start.go decides what a start request may ask, channels.go owns a
// WebSocket (one reader, one writer, a bounded queue), shell.go turns a client's
// messages into executor calls and kernel requests, and iopub.go turns a call's
// events back into Jupyter messages. [Gateway.Stats] counts the clients for
// /metrics (stats.go).
//
// Every live session is served: one an agent made through /v1, MCP or the CLI
// can be opened to watch its calls live (watch.go, through executor.Watch), read
// only unless Options.AllowTyping.
package jupyterapi
