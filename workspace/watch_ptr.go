package workspace

import "unsafe"

// pointerAt returns a pointer to b[off] for decoding inotify events in place; the
// kernel writes them aligned for struct inotify_event.
func pointerAt(b []byte, off int) unsafe.Pointer { return unsafe.Pointer(&b[off]) }
