package workspace

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStage100MB stages one 100 MB file, with and without SHA-256.
func BenchmarkStage100MB(b *testing.B) {
	src := filepath.Join(b.TempDir(), "big.bin")
	buf := make([]byte, 100<<20)
	_, _ = rand.Read(buf)
	if err := os.WriteFile(src, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, noHash := range []bool{false, true} {
		b.Run(fmt.Sprintf("hash=%v", !noHash), func(b *testing.B) {
			m := newManager(b, func(o *Options) { o.HashInputs = !noHash })
			s := openSession(b, m, "bench")
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Stage([]Input{{Name: "big.bin", Source: src}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCollect100Files collects 100 new 4 KiB files in a fresh session.
func BenchmarkCollect100Files(b *testing.B) {
	m := newManager(b, nil)
	content := make([]byte, 4096)
	_, _ = rand.Read(content)
	i := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		i++
		s := openSession(b, m, fmt.Sprintf("s%d", i))
		for j := range 100 {
			p := filepath.Join(s.Dir(), "outputs", fmt.Sprintf("d%d", j%10), fmt.Sprintf("f%d.bin", j))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		arts, err := s.Collect()
		if err != nil || len(arts) != 100 {
			b.Fatal(len(arts), err)
		}
	}
}

// BenchmarkCollectUnchanged collects 1,000 files none of which changed: the cost
// of the Collect that follows every execution.
func BenchmarkCollectUnchanged(b *testing.B) {
	m := newManager(b, nil)
	s := openSession(b, m, "s")
	for j := range 1000 {
		p := filepath.Join(s.Dir(), "outputs", fmt.Sprintf("d%d", j%10), fmt.Sprintf("f%d.txt", j))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// Files written long before the Collect, so none is "racy" and re-hashed.
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(filepath.Join(s.Dir(), "outputs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chtimes(p, old, old)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Collect(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		arts, err := s.Collect()
		if err != nil || len(arts) != 0 {
			b.Fatal(len(arts), err)
		}
	}
}

// BenchmarkOpenRemoveDisk opens and removes a session, without a disk quota
// and with the default 4 GiB one (an image made, formatted, mounted, then
// unmounted and deleted, when running as root).
func BenchmarkOpenRemoveDisk(b *testing.B) {
	for _, quota := range []int64{0, 4 << 30} {
		b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
			m := newManager(b, func(o *Options) { o.DiskQuota = quota })
			for b.Loop() {
				s, err := m.Open("bench")
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
				if err := m.Remove("bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
