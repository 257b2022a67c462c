// Package keep is the lifecycle that the docker, swarm and remote backends share
// for sessions kept across a restart of kernelbox (issue 34 item 1); what differs
// between them — what a record holds, how a session is recognised and taken back,
// what ending one means — stays in each backend's keep.go and reattach.go.
//
// Start with [Gate], the opening gate: a backend lets each Open in through it
// ([Open]), and Close or Detach shut it, which refuses new work, cancels what is
// in flight and waits for it. Then [Kept], the records New read, which Reattach
// takes once; [Reattach], the fan-out of a backend's Reattach over them (at most a
// bound at once, each record's outcome collected); and [Detach], the middle of a
// backend's Detach: what the next start cannot take back is ended ([Keeper].Drop),
// the state file is written a last time, and the rest is let go of
// ([Keeper].Release). [Keeper], three methods, is what each backend implements.
//
// The state file itself (docker.json, swarm.json, remote.json) has one rule here
// too: [Read] (a missing file is no state; anything else wrong is an error),
// [Write] (0600, replaced atomically, synced), [Writes] (serialized, none after
// Detach's last) and [Lock] (a second process is kept off the same file); and
// the checks every backend makes of it and its records ([CheckVersion],
// [CheckSession], [ValidToken]) before it adds those of its own fields.
package keep
