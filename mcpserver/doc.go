// Package mcpserver serves an Executor to AI agents over the Model Context Protocol,
// built on the official MCP Go SDK. Start reading at [New]: it returns an
// *mcp.Server with the tools execute_code, list_sessions, reset_session, fork_session,
// list_artifacts and read_artifact, and the resource template
// kernelbox://artifacts/{session}/{+path} (see [ArtifactURI]). Run the server on any
// SDK transport: stdio for a desktop client (`kernelbox mcp`), streamable HTTP for a
// remote one (`kernelbox serve` mounts it at /mcp).
//
// The tool descriptions are written for a model: they say what persists between
// calls, where inputs appear, where deliverables go and what happens at a limit.
//
// What a model sees is budgeted (budget.go): text is capped at Options.MaxTextBytes
// (the middle of long output is dropped, with a note saying how much), images are
// inlined up to Options.MaxImageBytes and linked as artifacts beyond it, and the
// structured result, which carries the same fields as the HTTP API's Result, leaves
// out rich data over the budget and says so. Calls that could not run (a permission
// denial, an invalid request, a full queue) are tool errors whose text names the
// cause, never protocol errors. A call whose request carries a progress token gets
// progress notifications with its output as it streams (progress.go).
package mcpserver
