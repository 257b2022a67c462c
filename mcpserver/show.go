package mcpserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// read_artifact and read_file show an open file the same way (this file):
// text by pages within the text budget, small images inline, anything else
// described with a resource link; resources/read of either gives the whole
// file up to MaxResourceBytes.

// shown is one open file to show: an artifact (an *os.File) or a session
// file, which for a session whose files live in the kernel is a stream read
// through the kernel's connection, so nothing here seeks or reads at an offset
// but through openFile.
type shown struct {
	f    openFile
	name string // as the model named it
	uri  string // its resource URI
	tool string // the tool that reads the next page
	// elsewhere ends the sentence "Its resource URI is URI and ..." said of a
	// file that is not shown: where else the model can get at it.
	elsewhere string
	// linkClipped adds the resource link to a text page that is not the whole file.
	linkClipped bool
}

// show returns the answer for sf: from offset, at most maxBytes (0 or more
// than the text budget: the budget) of a text file; an image up to
// MaxImageBytes inline; a description and a resource link otherwise.
func (s *server) show(sf shown, offset int64, maxBytes int) (*mcp.CallToolResult, error) {
	size := sf.f.size
	mt, textual := kind(sf.f.head(), sf.name)
	desc := fmt.Sprintf("%s (%s, %s)", sf.name, mt, humanBytes(size))
	link := &mcp.ResourceLink{URI: sf.uri, Name: sf.name, MIMEType: mt, Size: &size}

	switch {
	case isInlineImage(mt) && size <= int64(s.opts.MaxImageBytes):
		data, err := io.ReadAll(io.LimitReader(sf.f.r, size))
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: desc},
			&mcp.ImageContent{Data: data, MIMEType: mt},
		}}, nil
	case !textual:
		why := "it is not text"
		if isInlineImage(mt) {
			why = fmt.Sprintf("images are returned inline up to %s", humanBytes(int64(s.opts.MaxImageBytes)))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: fmt.Sprintf("%s is not shown: %s. Its resource URI is %s and %s.", desc, why, sf.uri, sf.elsewhere)},
			link,
		}}, nil
	}

	limit := s.opts.MaxTextBytes
	if maxBytes > 0 && maxBytes < limit {
		limit = maxBytes
	}
	if offset > size {
		return nil, fmt.Errorf("offset %d is past the end of %s", offset, desc)
	}
	if err := sf.f.skip(offset); err != nil {
		return nil, err
	}
	buf := make([]byte, limit)
	n, err := io.ReadFull(sf.f.r, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	buf = buf[:n]
	start := offset
	end := start + int64(len(buf))
	if end < size {
		// Do not split a character: stop before an incomplete one.
		buf = trimPartialRune(buf)
		end = start + int64(len(buf))
	}
	var b strings.Builder
	if start == 0 && end == size {
		fmt.Fprintf(&b, "%s:\n", desc)
	} else {
		fmt.Fprintf(&b, "%s, bytes %d-%d:\n", desc, start, end)
	}
	b.Write(buf)
	if end < size {
		fmt.Fprintf(&b, "\n[%s more bytes: call %s again with offset=%d]", count(int(size-end)), sf.tool, end)
	}
	res := text("%s", b.String())
	if sf.linkClipped && (start > 0 || end < size) {
		res.Content = append(res.Content, link)
	}
	return res, nil
}

// resourceContents is the resources/read answer for the open file f named
// name: the whole file, as text when it is, up to MaxResourceBytes; tool reads
// a longer one in pages.
func (s *server) resourceContents(uri string, f openFile, name, tool string) (*mcp.ReadResourceResult, error) {
	if f.size > int64(s.opts.MaxResourceBytes) {
		return nil, fmt.Errorf("read %s: %s, over the %s limit for resources; read it in pages with the %s tool",
			uri, humanBytes(f.size), humanBytes(int64(s.opts.MaxResourceBytes)), tool)
	}
	mt, textual := kind(f.head(), name)
	data, err := io.ReadAll(io.LimitReader(f.r, f.size))
	if err != nil {
		return nil, err
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mt}
	if textual && utf8.Valid(data) {
		c.Text = string(data)
	} else {
		c.Blob = data
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// openFile is a file being shown: its reader (buffered, so its head can be
// sniffed without reading it twice) and its size when opened.
type openFile struct {
	r      *bufio.Reader
	seeker io.Seeker // the file when it can seek (an *os.File, a download through the kernel), else nil
	size   int64
}

// osFile shows an open host file.
func osFile(f *os.File) (openFile, error) {
	fi, err := f.Stat()
	if err != nil {
		return openFile{}, err
	}
	return openFile{r: bufio.NewReaderSize(f, 4096), seeker: f, size: fi.Size()}, nil
}

// streamFile shows a file read as a stream of size bytes: a host file (an
// *os.File) or a reader through the kernel, which skips by seeking when it can
// (kernelfs's download does, without fetching what it skips).
func streamFile(r io.Reader, size int64) openFile {
	f := openFile{r: bufio.NewReaderSize(r, 4096), size: size}
	f.seeker, _ = r.(io.Seeker)
	return f
}

// head returns up to the first 512 bytes, without consuming them.
func (f openFile) head() []byte {
	b, _ := f.r.Peek(512)
	return b
}

// skip moves to offset from the start (nothing but the head has been consumed
// yet): a seek when the file can, else reading and dropping offset bytes (a
// stream that cannot seek, bounded by the file's size, which offset may not
// pass).
func (f openFile) skip(offset int64) error {
	if offset == 0 {
		return nil
	}
	if f.seeker != nil {
		_, err := f.seeker.Seek(offset, io.SeekStart)
		if err == nil {
			f.r.Reset(f.seeker.(io.Reader))
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	_, err := io.CopyN(io.Discard, f.r, offset)
	return err
}
