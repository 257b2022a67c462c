package procs

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestAlive: this process is alive; a child that exited is not, neither while it
// is a zombie (not yet waited for) nor once reaped.
func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the child never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid) {
		t.Error("a zombie is alive")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if Alive(pid) {
		t.Error("a reaped process is alive")
	}
}
