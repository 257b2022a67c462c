package testnet

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// AuthServer is a Python program: an HTTP/1.1 server (behind TLS when a
// certificate is given) that serves a directory only to requests carrying one
// header with one value — what an authenticated API or a private package index
// does — and answers 401 to the others. Its arguments: address, port,
// directory, certificate file and key file ("" and "" for plain HTTP), the
// header's name, and a file holding the value (never a command line).
//
// Besides the directory's files it answers, with the credential:
// /zeros?n=BYTES (that many zero bytes, streamed), /slow?s=SECONDS (a late
// answer), POST /sink (counts the body, Content-Length or chunked); and
// without it: /echo (the request's headers, as a host that reflects them) and
// /redirect?to=URL (a 302).
const AuthServer = `import functools, http.server, ssl, sys, time, urllib.parse
addr, port, d, cert, key, hdr, valfile = sys.argv[1:]
want = open(valfile).read().strip()
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a):
        pass
    def answer(self, code, body, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def gate(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/echo":
            self.answer(200, str(self.headers).encode())
            return False
        if u.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", q["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        if self.headers.get(hdr) != want:
            self.answer(401, b"401: no credential, or the wrong one\n")
            return False
        if u.path == "/slow":
            time.sleep(float(q.get("s", ["2"])[0]))
            self.answer(200, b"late\n")
            return False
        if u.path == "/zeros":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            b = bytes(1 << 20)
            while n > 0:
                k = min(n, len(b))
                self.wfile.write(b[:k] if k < len(b) else b)
                n -= k
            return False
        return True
    def do_GET(self):
        if self.gate():
            super().do_GET()
    def do_HEAD(self):
        if self.gate():
            super().do_HEAD()
    def do_POST(self):
        if self.headers.get(hdr) != want:
            self.close_connection = True
            self.answer(401, b"401: no credential, or the wrong one\n")
            return
        n = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                left = size
                while left:
                    left -= len(self.rfile.read(min(left, 1 << 20)))
                self.rfile.readline()
                n += size
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                k = len(self.rfile.read(min(left, 1 << 20)))
                if not k:
                    break
                left -= k
                n += k
        self.answer(200, str(n).encode())
s = http.server.ThreadingHTTPServer((addr, int(port)), functools.partial(H, directory=d))
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`

// NewAuth is New serving AuthServer: on port 8443 with TLS when certFile is
// not "", else on 8000 in plain HTTP; it answers 200 only to requests whose
// header carries value.
func NewAuth(t testing.TB, role, dir, certFile, keyFile, header, value string) *Host {
	t.Helper()
	vf := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(vf, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	port := 8000
	if certFile != "" {
		port = 8443
	}
	return start(t, role, dir, port, func(py string, h *Host) []string {
		return []string{py, "-c", AuthServer, h.Addr.String(), strconv.Itoa(h.Port), dir, certFile, keyFile, header, vf}
	})
}
