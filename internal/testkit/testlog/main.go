// Command testlog turns `go test -json` into what a plain `go test` prints (each
// package's ok/FAIL line, the output of the tests that failed, build errors) and ends
// with the slowest tests, so that a slow `make test` says which tests took its time.
// The events are copied to the file named by -json-out when it is set.
//
//	go test -json ./... | go run ./internal/testlog -slowest 25
//
// It exits 1 when a test, a package or a build failed, or when the stream ended
// with packages that never finished (go test was killed).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	slowest := flag.Int("slowest", 25, "how many of the slowest top-level tests to list at the end")
	jsonOut := flag.String("json-out", "", "copy the raw events to this file")
	flag.Parse()
	in := io.Reader(os.Stdin)
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	w := bufio.NewWriter(os.Stdout)
	l := newLog(w)
	err := l.read(in)
	l.summary(*slowest)
	_ = w.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog:", err)
		os.Exit(2)
	}
	if l.failed {
		os.Exit(1)
	}
}

// read handles the events of r until its end. A line that is not an event (go test
// printed it outside the JSON stream) is passed through as it is.
func (l *log) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			l.print(string(line) + "\n")
			continue
		}
		l.handle(ev)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	l.unfinished()
	return nil
}
