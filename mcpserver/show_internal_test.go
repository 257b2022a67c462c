package mcpserver

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seekCounter is a file read as a stream that counts the bytes read from it
// and seeks unless it says it cannot (as the executor's lent reader of a file
// that is not a kernel download does).
type seekCounter struct {
	r        *bytes.Reader
	read     int64
	canSeek  bool
	seekedTo int64
}

func (s *seekCounter) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.read += int64(n)
	return n, err
}

func (s *seekCounter) Seek(off int64, whence int) (int64, error) {
	if !s.canSeek {
		return 0, errors.ErrUnsupported
	}
	s.seekedTo = off
	return s.r.Seek(off, whence)
}

// TestStreamFileSkip: a page deep into a stream that can seek (a download
// through the kernel) seeks there after sniffing its head, reading none of the
// bytes between; one that cannot reads and drops them.
func TestStreamFileSkip(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	for _, canSeek := range []bool{true, false} {
		src := &seekCounter{r: bytes.NewReader(data), canSeek: canSeek}
		f := streamFile(src, int64(len(data)))
		require.Len(t, f.head(), 512)
		require.NoError(t, f.skip(900_000))
		page := make([]byte, 10)
		_, err := io.ReadFull(f.r, page)
		require.NoError(t, err)
		assert.Equal(t, "0123456789", string(page))
		if canSeek {
			assert.EqualValues(t, 900_000, src.seekedTo)
			assert.Less(t, src.read, int64(3*4096), "the bytes skipped were read")
		} else {
			assert.GreaterOrEqual(t, src.read, int64(900_010))
		}
	}
}
