package main

import (
	"bufio"
	"strings"
	"testing"
)

func run(t *testing.T, stream string) (string, bool) {
	t.Helper()
	var out strings.Builder
	w := bufio.NewWriter(&out)
	l := newLog(w)
	if err := l.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	l.summary(3)
	_ = w.Flush()
	return out.String(), l.failed
}

// A passing package prints its ok line and nothing of its tests; a failing test's
// output is printed without -v's progress lines; the slowest list names both.
func TestPassAndFail(t *testing.T) {
	out, failed := run(t, `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: quiet\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (2.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":2}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"output","Package":"p","Test":"TestB/sub","Output":"    b_test.go:9: it broke\n"}
{"Action":"fail","Package":"p","Test":"TestB/sub","Elapsed":5}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (5.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":5.5}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t7.6s\n"}
{"Action":"fail","Package":"p","Elapsed":7.6}
not json from go test
`)
	if !failed {
		t.Error("a failed test did not fail the run")
	}
	for _, want := range []string{"it broke", "--- FAIL: TestB (5.50s)", "FAIL\tp\t7.6s", "not json from go test",
		"     5.5 s  fail p TestB\n", "     2.0 s  pass p TestA\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, bad := range []string{"quiet", "=== RUN", "--- PASS", "TestB/sub\n"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q printed:\n%s", bad, out)
		}
	}
}

// A package that timed out prints the output of the tests that never ended; a
// stream cut short fails the run and says which package never ended; a build
// error is printed.
func TestTimeoutCutAndBuild(t *testing.T) {
	out, failed := run(t, `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"    h_test.go:3: waiting for the kernel\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1m0s\n"}
{"Action":"fail","Package":"p","Elapsed":60}
{"ImportPath":"q","Action":"build-output","Output":"q/x.go:1:1: expected 'package'\n"}
{"ImportPath":"q","Action":"build-fail"}
{"Action":"start","Package":"r"}
{"Action":"run","Package":"r","Test":"TestCut"}
{"Action":"output","Package":"r","Test":"TestCut","Output":"    c_test.go:3: half\n"}
`)
	if !failed {
		t.Error("a timed-out package did not fail the run")
	}
	for _, want := range []string{"panic: test timed out", "--- output of TestHang, which did not end:\n    h_test.go:3: waiting for the kernel",
		"expected 'package'", "FAIL\tr\t(the test stream ended before the package did)", "half"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestBuildFailAlone(t *testing.T) {
	if _, failed := run(t, `{"ImportPath":"q","Action":"build-fail"}`+"\n"); !failed {
		t.Error("a build failure did not fail the run")
	}
	if _, failed := run(t, `{"Action":"start","Package":"p"}`+"\n"+`{"Action":"pass","Package":"p"}`+"\n"); failed {
		t.Error("a passing package failed the run")
	}
}
