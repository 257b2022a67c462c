// Package jupyter is a client for the kernel gateway protocol: the REST + WebSocket API
// that Jupyter Server, Jupyter Kernel Gateway (jupyter-websocket mode) and Jupyter
// Enterprise Gateway speak. It never speaks ZMQ.
//
// Start reading at [Client] (REST: kernels, kernelspecs, version) and [Client.Connect],
// which returns a [Conn]: one WebSocket to one kernel, with one reader goroutine and
// serialized writes. [Conn.Execute] sends code and returns an [Execution] whose
// [Execution.Next] yields the cell's output messages as they arrive and reports
// completion when both the shell execute_reply and the iopub "idle" status for that
// request have arrived, in either order.
//
// An Endpoint can name a unix socket, so servers that listen on a socket in a private
// directory are reached without a TCP port. Over TCP on Linux the client sets
// TCP_QUICKACK before each read, which removes the ~40 ms delayed-ACK stall that
// otherwise dominates a small request/response exchange with a Tornado server.
//
// Both WebSocket framings are supported: the "legacy" JSON protocol (text frames, and
// binary frames when a message carries buffers) and the binary
// v1.kernel.websocket.jupyter.org protocol, which is preferred when the server offers
// it because the server then forwards kernel messages without re-encoding them.
//
// The package does not log unless given a logger, and keeps no global state.
// Package [github.com/kernelbox/kernelbox/jupyter/jupytertest] provides an in-process
// fake server for protocol tests.
package jupyter
