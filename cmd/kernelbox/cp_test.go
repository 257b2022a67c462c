package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/internal/testkit/testenv"
)

// kb runs a kernelbox command in process against s and returns its exit code,
// stdout and stderr.
func kb(t testing.TB, s *server, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{args[0], "--server", s.URL, "--token", s.Token}, args[1:]...)
	err := dispatch(context.Background(), full, &stdout, &stderr)
	code := 0
	if err != nil {
		var ec exitCode
		require.True(t, errors.As(err, &ec), "unexpected error: %v", err)
		code = ec.code
		stderr.WriteString(ec.msg)
	}
	return code, stdout.String(), stderr.String()
}

// treeSums maps each regular file below dir (slash path) to its SHA-256.
func treeSums(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[filepath.ToSlash(rel)] = sha256.Sum256(b)
		return nil
	}))
	return sums
}

// TestCpRoundTrip copies a small directory tree into a session and back with
// `kernelbox cp`, byte-identical, with ls and rm between, and a file through
// stdin and stdout.
func TestCpRoundTrip(t *testing.T) {
	s := startServe(t)
	src := filepath.Join(t.TempDir(), "tree")
	files := map[string][]byte{
		"a.txt":            []byte("alpha\n"),
		"empty":            {},
		"sub/b.bin":        make([]byte, 300<<10),
		"sub/deeper/c.csv": []byte("x,y\n1,2\n"),
		"sp ace/%odd?.txt": []byte("odd name"),
	}
	_, _ = rand.Read(files["sub/b.bin"])
	for name, b := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}

	code, out, errOut := kb(t, s, "cp", src, "cpt:")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	code, out, errOut = kb(t, s, "ls", "cpt:tree/sub")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "b.bin")
	assert.Contains(t, out, "deeper/")
	assert.Contains(t, out, strconv.Itoa(300<<10))

	back := t.TempDir()
	code, out, errOut = kb(t, s, "cp", "cpt:tree", back)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Equal(t, treeSums(t, src), treeSums(t, filepath.Join(back, "tree")))

	code, out, errOut = kb(t, s, "cp", "cpt:tree/sub/deeper/c.csv", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "x,y\n1,2\n", out)

	// stdin, through the binary.
	cmd := exec.Command(kernelboxBin(t), "cp", "--server", s.URL, "--token", s.Token, "-", "cpt:from-stdin.txt")
	cmd.Stdin = strings.NewReader("piped in")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	code, out, _ = kb(t, s, "cp", "cpt:from-stdin.txt", "-")
	require.Equal(t, 0, code)
	assert.Equal(t, "piped in", out)

	code, _, errOut = kb(t, s, "rm", "cpt:tree/sub")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is_directory")
	code, _, errOut = kb(t, s, "rm", "-r", "cpt:tree/sub")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = kb(t, s, "ls", "cpt:tree/sub")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not_found")
	code, _, errOut = kb(t, s, "cp", "cpt:../../etc/passwd", "-")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "invalid_path")
}

// vmKB reads a VmRSS or VmHWM line (in kB) of /proc/PID/status.
func vmKB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// pattern is a reader of n pseudo-random bytes that holds none of them.
type pattern struct {
	n, off int64
	block  []byte
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := int64(len(b))
	if k > p.n-p.off {
		k = p.n - p.off
	}
	done := int64(0)
	for done < k {
		at := (p.off + done) % int64(len(p.block))
		done += int64(copy(b[done:k], p.block[at:]))
	}
	p.off += k
	return int(k), nil
}

// TestServeUploadRSSBounded streams a 256 MiB upload and its download through
// `kernelbox serve --backend local` (a child process): the server's peak RSS
// (VmHWM) grows by less than 32 MB, and the bytes come back identical
// (serveThroughput).
func TestServeUploadRSSBounded(t *testing.T) {
	serveThroughput(t, startServe(t), 32<<10, 32<<10)
}

// serveThroughput copies a file of KERNELBOX_FILES_BYTES bytes (default 256
// MiB) into session "rss" of s and back, KERNELBOX_FILES_ROUNDS times (default
// 1), each round beside `cp` of the same file on this machine (cp, upload,
// download, interleaved so that the machine's load hits all three alike), and
// logs the throughputs, their ratios to cp and serve's RSS before and at its
// peak (VmHWM). Each download must be the file byte for byte, and serve's peak
// RSS must grow by less than maxGrowth kB, far below the file's size (and by less
// than maxUpGrowth kB by the end of the first upload): uploads and downloads
// stream.
func serveThroughput(t *testing.T, s *server, maxGrowth, maxUpGrowth int64) {
	size := int64(256 << 20)
	if v := os.Getenv("KERNELBOX_FILES_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "KERNELBOX_FILES_BYTES")
		size = n
	}
	rounds := 1
	if v := os.Getenv("KERNELBOX_FILES_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "KERNELBOX_FILES_ROUNDS")
		rounds = n
	}
	c, err := client.New(s.URL, &client.Options{Token: s.Token})
	require.NoError(t, err)
	ctx := context.Background()
	// Warm the server's paths up with a small file first.
	_, err = c.Upload(ctx, "rss", "warm", strings.NewReader("x"), nil)
	require.NoError(t, err)
	before := vmKB(t, s.Pid, "VmRSS")

	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	block := make([]byte, 1<<20+7)
	_, _ = rand.Read(block)
	f, err := os.Create(src)
	require.NoError(t, err)
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), &pattern{n: size, block: block})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	want := h.Sum(nil)

	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	var cps, ups, downs []float64
	for r := range rounds {
		dst := filepath.Join(dir, "dst.bin")
		start := time.Now()
		out, err := exec.Command("cp", src, dst).CombinedOutput()
		cpTime := time.Since(start)
		require.NoError(t, err, "%s", out)
		require.NoError(t, os.Remove(dst))

		in, err := os.Open(src)
		require.NoError(t, err)
		start = time.Now()
		n, err := c.Upload(ctx, "rss", "big.bin", in, nil)
		up := time.Since(start)
		in.Close()
		require.NoError(t, err)
		require.EqualValues(t, size, n)
		upPeak := vmKB(t, s.Pid, "VmHWM")
		if r == 0 {
			assert.Less(t, upPeak-before, maxUpGrowth, "the server's RSS grew by %d kB during the upload", upPeak-before)
		}

		got, err := os.Create(dst)
		require.NoError(t, err)
		start = time.Now()
		n, err = c.Download(ctx, "rss", "big.bin", got)
		down := time.Since(start)
		require.NoError(t, got.Close())
		require.NoError(t, err)
		require.EqualValues(t, size, n)
		assert.Equal(t, hex.EncodeToString(want), fileSum(t, dst), "the download is the upload")
		require.NoError(t, os.Remove(dst))

		cps, ups, downs = append(cps, mbps(cpTime)), append(ups, mbps(up)), append(downs, mbps(down))
		t.Logf("round %d, %d bytes: cp %.0f MB/s, upload %.0f MB/s (%.2fx cp), download %.0f MB/s (%.2fx cp); serve's peak RSS %d kB after the upload, %d kB after the download",
			r+1, size, mbps(cpTime), mbps(up), mbps(up)/mbps(cpTime), mbps(down), mbps(down)/mbps(cpTime), upPeak, vmKB(t, s.Pid, "VmHWM"))
	}
	peak := vmKB(t, s.Pid, "VmHWM")
	growth := peak - before
	t.Logf("median of %d: cp %.0f MB/s, upload %.0f MB/s (%.2fx), download %.0f MB/s (%.2fx); serve RSS %d kB before, peak %d kB (growth %d kB)",
		rounds, median(cps), median(ups), median(ups)/median(cps), median(downs), median(downs)/median(cps), before, peak, growth)
	assert.Less(t, growth, maxGrowth, "the server's RSS grew by %d kB", growth)
}

// fileSum is the hex SHA-256 of the file at path.
func fileSum(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestCpRoundTripDocker: `kernelbox cp` of a directory tree into a docker
// session and back is byte-identical, and the kernel (another uid) can write
// into a directory the upload made.
func TestCpRoundTripDocker(t *testing.T) {
	testenv.Image(t, "kernelbox/kernel")
	ws, data := testDirs(t)
	_, url, log := rawServe(t, "--backend", "docker", "--workspace", ws, "--workdir", data, "--token", "tok")
	s := &server{URL: url, Token: "tok"}
	// The first call starts the container, which hands the session directory
	// to the kernel's uid; what is uploaded afterwards takes that owner.
	r, _ := execCLITok(t, url, "tok", "dk", "1")
	require.Equal(t, "ok", string(r.Status), "%+v\n%s", r.Error, log)

	src := filepath.Join(t.TempDir(), "tree")
	files := map[string][]byte{"a.txt": []byte("alpha"), "sub/b.bin": make([]byte, 200<<10), "sub/deep/c": {}}
	_, _ = rand.Read(files["sub/b.bin"])
	for name, b := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	code, out, errOut := kb(t, s, "cp", src, "dk:")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	r, _ = execCLITok(t, url, "tok", "dk", `import hashlib, os
open("tree/sub/deep/kernel.txt", "w").write("from the kernel")
hashlib.sha256(open("tree/sub/b.bin", "rb").read()).hexdigest()`)
	require.Equal(t, "ok", string(r.Status), "%+v", r.Error)
	sum := sha256.Sum256(files["sub/b.bin"])
	assert.Equal(t, "'"+hex.EncodeToString(sum[:])+"'", r.Result)

	back := t.TempDir()
	code, out, errOut = kb(t, s, "cp", "dk:tree", back)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	want := treeSums(t, src)
	want["sub/deep/kernel.txt"] = sha256.Sum256([]byte("from the kernel"))
	assert.Equal(t, want, treeSums(t, filepath.Join(back, "tree")))
}

// execCLITok is execCLI with a token.
func execCLITok(t *testing.T, url, token, session, code string) (*api.Result, int) {
	t.Helper()
	cmd := exec.Command(kernelboxBin(t), "exec", "--server", url, "--token", token, "--session", session, "--json", "-c", code)
	out, err := cmd.Output()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var r api.Result
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)
	return &r, rc
}
