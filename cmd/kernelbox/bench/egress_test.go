package bench

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kernelbox/kernelbox/egress"
)

// fetchSeconds takes only the download's own answer: the whole body and a time.
func TestFetchSeconds(t *testing.T) {
	if ms, err := fetchSeconds(strconv.Itoa(egressBytes) + " 0.25\n"); err != nil || ms != 250 {
		t.Fatalf("good answer: %v %v", ms, err)
	}
	for _, bad := range []string{"", "garbage", strconv.Itoa(egressBytes-1) + " 0.25", strconv.Itoa(egressBytes) + " soon", "1 2 3"} {
		if _, err := fetchSeconds(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The reference side of the egress row works on its own: the host's urllib
// through a proxy of the row's rules reaches the loopback server, and a host
// the rules do not name is refused.
func TestEgressReference(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	srv, url, err := serveZeros(egressBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host := url[len("http://") : len(url)-len("/zeros")]
	rules, err := egress.Compile(egress.Policy{Allow: []string{host}, CIDRs: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	proxy, closeProxy, err := hostProxy(rules)
	if err != nil {
		t.Fatal(err)
	}
	defer closeProxy()
	out, err := exec.Command(py, "-c", egressFetch+"print(*fetch(sys.argv[1], sys.argv[2]))", url, proxy).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := fetchSeconds(string(out)); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(py, "-c", egressFetch+"print(*fetch(sys.argv[1], sys.argv[2]))", "http://127.0.0.2:1/zeros", proxy).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "403") {
		t.Fatalf("a host off the list: %v: %s", err, out)
	}
}
