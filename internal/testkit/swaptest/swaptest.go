//go:build linux

// Package swaptest races code that must not follow a symbolic link against an
// attacker who keeps swapping a directory on its path with a link (renameat2
// RENAME_EXCHANGE, as a kernel with write access to a directory on the path
// could). It is for tests: Race swaps while it runs the code many times and
// fails the test if the code ever reached what the link leads to; Exchange is
// the swapping alone.
package swaptest

import (
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Exchange swaps the entries a and b (a directory and a symbolic link, say)
// over and over in a goroutine until the returned stop is called; stop waits
// for the goroutine. A failed swap fails tb. stop is also registered as a
// cleanup, so a test that fails early does not leave it running.
func Exchange(tb testing.TB, a, b string) (stop func()) {
	tb.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				tb.Errorf("renameat2: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { done.Store(true); wg.Wait() }) }
	tb.Cleanup(stop)
	return stop
}

// Race swaps a and b (Exchange) while it calls try runs times, then fails tb if
// any call leaked or none succeeded (a race nothing got through proves
// nothing). try reports whether the operation succeeded and, if so, whether
// what it got was the secret the link leads to. Failed operations are
// expected; leaks are not.
func Race(tb testing.TB, a, b string, runs int, try func() (ok, leaked bool)) {
	tb.Helper()
	stop := Exchange(tb, a, b)
	var oks, leaks int
	for range runs {
		ok, leaked := try()
		if ok {
			oks++
		}
		if leaked {
			leaks++
		}
	}
	stop()
	tb.Logf("%d runs: %d succeeded, %d reached the secret", runs, oks, leaks)
	if leaks > 0 {
		tb.Errorf("%d of %d runs reached the secret", leaks, runs)
	}
	if oks == 0 {
		tb.Errorf("none of %d runs succeeded: the race proves nothing", runs)
	}
}
