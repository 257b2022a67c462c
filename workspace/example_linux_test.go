//go:build linux

package workspace_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/kernelbox/kernelbox/workspace"
)

// ExampleSession_CollectCall collects a file that a background writer still holds
// open: it comes back partial with a note, and complete once the writer closes it.
func ExampleSession_CollectCall() {
	tmp, err := os.MkdirTemp("", "kernelbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	m, err := workspace.New(workspace.Options{Root: filepath.Join(tmp, "kb")})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.Open("bg")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// A thread the code started keeps writing after the call's code returned.
	start := time.Now()
	w, err := os.Create(filepath.Join(s.Dir(), "outputs", "log.csv"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(w, "step,loss")
	arts, notes, _ := s.CollectCall(start)
	fmt.Println(arts[0].Name, arts[0].Size, "partial:", arts[0].Partial)
	fmt.Println(notes[0])

	fmt.Fprintln(w, "1,0.5")
	w.Close()
	arts, notes, _ = s.CollectCall(time.Now())
	fmt.Println(arts[0].Name, arts[0].Size, "partial:", arts[0].Partial)
	fmt.Println(notes[0])
	// Output:
	// log.csv 10 partial: true
	// outputs/log.csv was still being written when collected (10 bytes so far); it is collected again when it changes
	// log.csv 16 partial: false
	// outputs/log.csv is complete now (16 bytes); an earlier call collected it while it was still being written
}
