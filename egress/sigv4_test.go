package egress

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// An S3-style host that checks each request's SigV4 signature with the real
// credentials answers 200 to requests the kernel signed with the placeholder
// key, through the interception; a signature with a key of the kernel's own is
// refused by the proxy; the credentials are nowhere in what the proxy records.
func TestInterceptSigV4(t *testing.T) {
	const access, secret = "AKIAKBTESTACCESS", "kb-sigv4-secret-key-91b2"
	t.Setenv("KB_TEST_S3_ACCESS", access)
	t.Setenv("KB_TEST_S3_SECRET", secret)
	rules := []SecretRule{{Name: "s3", Kind: KindSigV4, Hosts: []string{"api.test:PORT"},
		AccessKeyFromEnv: "KB_TEST_S3_ACCESS", SecretKeyFromEnv: "KB_TEST_S3_SECRET", Region: "us-east-1", Service: "s3"}}
	verify := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := checkSigV4(r, access, secret); err != "" {
			http.Error(w, err, http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok "+strconv.Itoa(len(body)))
	}
	n := newSecretNet(t, rules, func(m *http.ServeMux) { m.HandleFunc("/bucket/", verify) })
	c := n.client()
	kernelSigned := func(method, key string, body string) *http.Request {
		req, _ := http.NewRequest(method, n.url("api.test", "/bucket/"+key), strings.NewReader(body))
		if body == "" {
			req.Body = http.NoBody
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: Placeholder("s3"), SecretAccessKey: "unused"},
			req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	for _, req := range []*http.Request{kernelSigned("GET", "a.csv", ""), kernelSigned("PUT", "b.csv", "x,y\n1,2\n")} {
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", req.Method, resp.StatusCode, b)
		}
	}
	// No signature at all: the proxy signs.
	req, _ := http.NewRequest("GET", n.url("api.test", "/bucket/c.csv?list-type=2&prefix=a%20b"), nil)
	if code, body := doReq(t, c, req); code != 200 {
		t.Fatalf("unsigned: %d %s", code, body)
	}
	// The kernel's own key: refused.
	req, _ = http.NewRequest("GET", n.url("api.test", "/bucket/a.csv"), nil)
	v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIAOWN", SecretAccessKey: "own"}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	if code, body := doReq(t, c, req); code != 403 || !strings.Contains(body, "carries its own Authorization") {
		t.Fatalf("own key: %d %s", code, body)
	}
	// A per-chunk streaming signature cannot be re-signed: refused.
	req = kernelSigned("PUT", "d.csv", "x")
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	if code, body := doReq(t, c, req); code != 403 || !strings.Contains(body, "per-chunk signatures") {
		t.Fatalf("streaming signature: %d %s", code, body)
	}
	c.CloseIdleConnections()
	n.recordWith(t, "secret s3: PUT /bucket/b.csv 200")
	n.mu.Lock()
	all := n.logs.String()
	for _, r := range n.records {
		all += r.String()
	}
	n.mu.Unlock()
	if strings.Contains(all, secret) || strings.Contains(all, access) {
		t.Fatalf("a credential is in the records or the log: %s", all)
	}
}

func doReq(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkSigV4 recomputes a received request's signature with the credentials,
// as S3 does, and returns why it does not match ("" when it does).
func checkSigV4(r *http.Request, access, secret string) string {
	auth := r.Header.Get("Authorization")
	if !strings.Contains(auth, "Credential="+access+"/") {
		return "wrong or no access key: " + auth
	}
	i := strings.Index(auth, "SignedHeaders=")
	if i < 0 {
		return "no SignedHeaders"
	}
	signed := strings.Split(strings.SplitN(auth[i+len("SignedHeaders="):], ",", 2)[0], ";")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "bad X-Amz-Date"
	}
	re, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	re.ContentLength = r.ContentLength
	for _, h := range signed {
		if h != "host" && h != "content-length" {
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, re,
		r.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", at); err != nil {
		return err.Error()
	}
	if re.Header.Get("Authorization") != auth {
		return "signature mismatch"
	}
	return ""
}
