package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// maxHashedBody is the largest body the proxy reads whole to hash it for a
// SigV4 signature, when the request does not carry its hash
// (X-Amz-Content-Sha256) and the service is not S3 (which takes UNSIGNED-PAYLOAD).
const maxHashedBody = 1 << 20

// emptyHash is the SHA-256 of nothing, hex-encoded.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// signer is aws-sdk-go-v2's SigV4 signer; it keeps no per-request state.
var (
	signer   = v4.NewSigner()
	signerS3 = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
)

// sign replaces the kernel's AWS signature (made with a placeholder key) with
// one made with the rule's credentials. The body is not buffered: the
// signature covers the hash the kernel's SDK sent (X-Amz-Content-Sha256, which
// S3 checks against the body), or UNSIGNED-PAYLOAD for S3; a streaming
// signature (aws-chunked with per-chunk signatures) cannot be re-signed here
// and is refused.
func (r *secretRule) sign(req *http.Request, v *secretValue, now time.Time) error {
	if auth := req.Header.Values("Authorization"); len(auth) > 1 || len(auth) == 1 && !strings.Contains(auth[0], Placeholder(r.Name)) {
		return fmt.Errorf("the request carries its own Authorization; kernelbox signs requests of rule %s: sign with the access key %s (any secret key), or not at all", r.Name, Placeholder(r.Name))
	}
	hash, err := payloadHash(req, r.Service == "s3")
	if err != nil {
		return err
	}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		req.Header.Del(k)
	}
	if r.Service == "s3" {
		req.Header.Set("X-Amz-Content-Sha256", hash)
	}
	creds := aws.Credentials{AccessKeyID: v.access, SecretAccessKey: v.secret, SessionToken: v.token}
	s := signer
	if r.Service == "s3" {
		s = signerS3
	}
	if err := s.SignHTTP(context.Background(), creds, req, hash, r.Service, r.Region, now); err != nil {
		// The signer's errors name no credential; keep only that it failed.
		return errors.New("signing failed")
	}
	return nil
}

// payloadHash is the hash the signature covers: the kernel's
// X-Amz-Content-Sha256 when it sent one, else UNSIGNED-PAYLOAD for S3, else
// the hash of a body of at most maxHashedBody bytes, read here.
func payloadHash(req *http.Request, s3 bool) (string, error) {
	h := req.Header.Get("X-Amz-Content-Sha256")
	switch {
	case strings.HasPrefix(h, "STREAMING-AWS4-") || strings.HasPrefix(h, "STREAMING-AWS4-HMAC-SHA256"):
		return "", fmt.Errorf("X-Amz-Content-Sha256 %q: per-chunk signatures cannot be re-signed by the proxy; disable payload signing (S3: UNSIGNED-PAYLOAD)", clip(h))
	case h == "UNSIGNED-PAYLOAD" || h == "STREAMING-UNSIGNED-PAYLOAD-TRAILER":
		return h, nil
	case len(h) == 64 && isHex(h):
		return strings.ToLower(h), nil
	case h != "":
		return "", fmt.Errorf("X-Amz-Content-Sha256 %q: want a SHA-256 in hex or UNSIGNED-PAYLOAD", clip(h))
	case s3:
		return "UNSIGNED-PAYLOAD", nil
	case req.Body == nil || req.Body == http.NoBody:
		return emptyHash, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxHashedBody+1))
	if err != nil {
		return "", fmt.Errorf("read the body to sign it: %w", err)
	}
	if len(b) > maxHashedBody {
		return "", fmt.Errorf("a body over %d bytes without X-Amz-Content-Sha256: send its hash", maxHashedBody)
	}
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.TransferEncoding = nil
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
