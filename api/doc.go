// Package api holds kernelbox's wire types: what a call sends ([Request],
// [ExecuteBody]), what it gets back ([Result], [Output], [Artifact], [Event]), what a
// session looks like ([SessionInfo]), the error codes every front end speaks
// ([Code], [CodeOf]), the session-id rule ([ValidSessionID]) and the types of the
// session files API, which the workspace (host) and kernelfs (in a kernel) both
// implement ([PutOptions], [DirListing], [FileEntry]).
//
// It is a leaf: it imports only the standard library, so a client binary that
// imports it pulls in nothing of the executor, its backends or its protocol
// machinery. Start reading at [Result].
package api
