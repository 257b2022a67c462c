package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
)

// coldStart measures a new session's first result without a warm pool.
func (r *runner) coldStart(ctx context.Context, e *executor.Executor) (Row, error) {
	n := r.iters(1, 3)
	var kb []float64
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("cold%d", i)
		_, d, err := r.exec(ctx, e, api.Request{SessionID: id, Code: "1 + 1"})
		if err != nil {
			return Row{}, err
		}
		kb = append(kb, ms(d))
		_ = e.CloseSession(ctx, id)
	}
	return Row{Name: r.backend + ": cold start, first result", N: n, KB50: percentile(kb, .5), KB99: percentile(kb, .99),
		Note: "no reference; a new session's kernel (and container) started"}, nil
}

// trivial measures `x = i; x + 1` round-trips, interleaved with the reference.
func (r *runner) trivial(ctx context.Context, e *executor.Executor) (Row, error) {
	// Small blocks: the machine's load drifts, and long blocks would give one side
	// more of a slow spell than the other.
	rounds, block := r.iters(4, 50), r.iters(5, 10)
	if _, _, err := r.exec(ctx, e, api.Request{SessionID: "trivial", Code: "x = 0"}); err != nil {
		return Row{}, err
	}
	var kb, ref []float64
	i := 0
	for round := 0; round < rounds; round++ {
		for k := 0; k < block; k++ {
			i++
			_, d, err := r.exec(ctx, e, api.Request{SessionID: "trivial", Code: "x = " + strconv.Itoa(i) + "; x + 1"})
			if err != nil {
				return Row{}, err
			}
			kb = append(kb, ms(d))
		}
		a, err := r.ref.do("trivial", strconv.Itoa(block))
		if err != nil {
			return Row{}, err
		}
		ref = append(ref, a.MS...)
	}
	return Row{Name: r.backend + ": trivial cell round-trip", N: len(kb), KB50: percentile(kb, .5), KB99: percentile(kb, .99),
		Ref50: percentile(ref, .5), Ref99: percentile(ref, .99), RefLabel: "jupyter_client over ZMQ"}, nil
}

// stream measures one cell printing 10 MiB in one write.
func (r *runner) stream(ctx context.Context, e *executor.Executor) (Row, error) {
	const size = 10 << 20
	code := fmt.Sprintf("import sys; sys.stdout.write('x' * %d); sys.stdout.flush()", size)
	return r.output(ctx, e, "stream", code, size, ": 10 MiB of stdout from one cell", "stream "+strconv.Itoa(size))
}

// lines measures one cell printing 10,000 lines of 400 bytes, each flushed: one
// stream message a line, as progress output sends them.
func (r *runner) lines(ctx context.Context, e *executor.Executor) (Row, error) {
	const count, size = 10000, 400
	code := fmt.Sprintf("import sys\nfor _ in range(%d):\n    sys.stdout.write('x' * %d + '\\n'); sys.stdout.flush()", count, size-1)
	return r.output(ctx, e, "lines", code, count*size, ": 10,000 flushed lines (4 MB) from one cell", fmt.Sprintf("lines %d %d", count, size))
}

// output measures a cell that prints size bytes, against the reference command
// refCmd doing the same over ZMQ.
func (r *runner) output(ctx context.Context, e *executor.Executor, session, code string, size int, label, refCmd string) (Row, error) {
	n := r.iters(1, 5)
	if err := r.warmUp(ctx, e, session); err != nil {
		return Row{}, err
	}
	var kb, ref []float64
	for i := 0; i < n; i++ {
		res, d, err := r.exec(ctx, e, api.Request{SessionID: session, Code: code})
		if err != nil {
			return Row{}, err
		}
		if len(res.Stdout) != size || res.Truncated {
			return Row{}, fmt.Errorf("%s: got %d bytes (truncated %v: %s), want %d", session, len(res.Stdout), res.Truncated, res.TruncationNote, size)
		}
		kb = append(kb, ms(d))
		a, err := r.ref.do(refCmd)
		if err != nil {
			return Row{}, err
		}
		if a.Bytes != int64(size) {
			return Row{}, fmt.Errorf("reference %s: got %d bytes, want %d", session, a.Bytes, size)
		}
		ref = append(ref, a.MS...)
	}
	return Row{Name: r.backend + label, N: n, KB50: percentile(kb, .5), KB99: percentile(kb, .99),
		Ref50: percentile(ref, .5), Ref99: percentile(ref, .99), RefLabel: "jupyter_client over ZMQ", Note: "every byte delivered, not truncated"}, nil
}

// stage measures a call that stages a 100 MiB input that changed since the last
// call (one byte is rewritten before each), against a plain file copy.
func (r *runner) stage(ctx context.Context, e *executor.Executor) (Row, error) {
	return r.stageRow(ctx, e, true, ": call staging a changed 100 MiB input", "kernelbox also runs the cell")
}

// restage measures a call whose 100 MiB input is the one the session already
// holds: kernelbox compares stats and copies nothing. The reference still copies.
func (r *runner) restage(ctx context.Context, e *executor.Executor) (Row, error) {
	return r.stageRow(ctx, e, false, ": call restaging an unchanged 100 MiB input", "kernelbox copies nothing and runs the cell")
}

func (r *runner) stageRow(ctx context.Context, e *executor.Executor, change bool, name, note string) (Row, error) {
	src := filepath.Join(r.data, "input-100m.bin")
	if err := writeRandom(src, 100<<20); err != nil {
		return Row{}, err
	}
	defer os.Remove(src)
	session := "stage"
	if !change {
		session = "restage"
		// A file changed within the last second is copied on every call (its
		// stat cannot be trusted yet); let it settle.
		time.Sleep(1100 * time.Millisecond)
	}
	if err := r.warmUp(ctx, e, session); err != nil {
		return Row{}, err
	}
	req := api.Request{SessionID: session, Code: "pass", Inputs: []string{src}}
	if !change { // the first call copies
		if _, _, err := r.exec(ctx, e, req); err != nil {
			return Row{}, err
		}
	}
	n := r.iters(1, 5)
	var kb, ref []float64
	for i := 0; i < n; i++ {
		if change {
			if err := touchByte(src, i); err != nil {
				return Row{}, err
			}
		}
		_, d, err := r.exec(ctx, e, req)
		if err != nil {
			return Row{}, err
		}
		kb = append(kb, ms(d))
		dst := filepath.Join(r.dir, "copy.bin")
		a, err := r.ref.do("copy", src, dst)
		if err != nil {
			return Row{}, err
		}
		os.Remove(dst)
		ref = append(ref, a.MS...)
	}
	return Row{Name: r.backend + name, N: n, KB50: percentile(kb, .5), KB99: percentile(kb, .99),
		Ref50: percentile(ref, .5), Ref99: percentile(ref, .99), RefLabel: "shutil.copyfile", Note: note}, nil
}

// touchByte rewrites the first byte of path, so that its content and ctime change.
func touchByte(path string, i int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte{byte(i)}, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// artifacts measures a cell writing 100 small files that are collected as artifacts,
// against the reference kernel writing them and a plain copy to an artifacts dir.
func (r *runner) artifacts(ctx context.Context, e *executor.Executor) (Row, error) {
	if err := r.warmUp(ctx, e, "artifacts"); err != nil {
		return Row{}, err
	}
	n := r.iters(1, 5)
	var kb, ref []float64
	for i := 0; i < n; i++ {
		code := fmt.Sprintf("import os\nos.makedirs('outputs/r%d', exist_ok=True)\nfor k in range(100):\n    open('outputs/r%d/f%%03d.txt' %% k, 'w').write('%d-%%d' %% k * 50)", i, i, i)
		res, d, err := r.exec(ctx, e, api.Request{SessionID: "artifacts", Code: code})
		if err != nil {
			return Row{}, err
		}
		if len(res.Artifacts) != 100 {
			return Row{}, fmt.Errorf("artifacts: got %d, want 100", len(res.Artifacts))
		}
		kb = append(kb, ms(d))
		dir := filepath.Join(r.dir, fmt.Sprintf("refart%d", i))
		a, err := r.ref.do("artifacts", dir, "100")
		if err != nil {
			return Row{}, err
		}
		ref = append(ref, a.MS...)
	}
	return Row{Name: r.backend + ": cell writing 100 artifacts", N: n, KB50: percentile(kb, .5), KB99: percentile(kb, .99),
		Ref50: percentile(ref, .5), Ref99: percentile(ref, .99), RefLabel: "ZMQ cell + shutil copies", Note: "kernelbox also hashes each file"}, nil
}

func writeRandom(path string, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for written := 0; written < size; written += len(buf) {
		_, _ = rand.Read(buf)
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// warmUp starts a session's kernel so that a scenario does not measure the start.
func (r *runner) warmUp(ctx context.Context, e *executor.Executor, session string) error {
	_, _, err := r.exec(ctx, e, api.Request{SessionID: session, Code: "import sys, os"})
	return err
}
