package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// MaxHeaderLines is the most header lines in one request head.
const MaxHeaderLines = 100

// errRefused marks a request head the proxy refuses on purpose (smuggling or bounds),
// as opposed to one it could not read (a closed connection, a timeout).
var errRefused = errors.New("refused")

// head is a request head read and checked by readHead.
type head struct {
	raw        []byte // the head as received, ending in the blank line
	method     string
	target     string // authority for CONNECT, absolute URI otherwise
	host       string // from the target
	port       int
	hostHeader string // "" when absent
}

// readHead reads one request head from br, refusing what could be read two ways by
// two parsers: a bare CR or LF, a line over maxLine, a head over maxHead, folded
// lines, two Host, Content-Length or Transfer-Encoding headers, Content-Length
// with Transfer-Encoding, a Content-Length that is not one decimal number, a
// Transfer-Encoding other than "chunked", a target that is not an authority
// (CONNECT) or an absolute http URI (any other method), or that holds a '#' or
// a '@'. Refusals wrap errRefused.
func readHead(br *bufio.Reader, maxLine, maxHead int) (*head, error) {
	var raw bytes.Buffer
	h := &head{}
	hosts, lengths, tes := 0, 0, 0
	for n := 0; ; n++ {
		line, err := readLine(br, maxLine)
		if err != nil {
			return nil, err
		}
		raw.Write(line)
		raw.WriteString("\r\n")
		if raw.Len() > maxHead {
			return nil, fmt.Errorf("%w: request head over %d bytes", errRefused, maxHead)
		}
		if n > MaxHeaderLines {
			return nil, fmt.Errorf("%w: over %d header lines", errRefused, MaxHeaderLines)
		}
		if n == 0 {
			if err := h.requestLine(string(line)); err != nil {
				return nil, err
			}
			continue
		}
		if len(line) == 0 {
			break
		}
		name, value, err := headerLine(string(line))
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(name) {
		case "host":
			hosts++
			h.hostHeader = value
		case "content-length":
			lengths++
			if !isDecimal(value) {
				return nil, fmt.Errorf("%w: Content-Length %q is not one decimal number", errRefused, clip(value))
			}
		case "transfer-encoding":
			tes++
			if !strings.EqualFold(value, "chunked") {
				return nil, fmt.Errorf("%w: Transfer-Encoding %q: the proxy passes only chunked", errRefused, clip(value))
			}
		}
	}
	switch {
	case hosts > 1:
		return nil, fmt.Errorf("%w: more than one Host header", errRefused)
	case lengths > 1:
		return nil, fmt.Errorf("%w: more than one Content-Length header", errRefused)
	case tes > 1:
		return nil, fmt.Errorf("%w: more than one Transfer-Encoding header", errRefused)
	case lengths > 0 && tes > 0:
		return nil, fmt.Errorf("%w: both Content-Length and Transfer-Encoding", errRefused)
	}
	h.raw = raw.Bytes()
	return h, nil
}

// readLine reads one line ending in CRLF and returns it without the CRLF.
func readLine(br *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > maxLine+2 {
			return nil, fmt.Errorf("%w: a header line is over %d bytes", errRefused, maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: a line ends in a bare LF", errRefused)
	}
	line = line[:len(line)-2]
	if i := bytes.IndexAny(line, "\r\n\x00"); i >= 0 {
		return nil, fmt.Errorf("%w: a line holds a bare CR, LF or NUL", errRefused)
	}
	return line, nil
}

// requestLine parses "METHOD target HTTP/1.x".
func (h *head) requestLine(s string) error {
	parts := strings.Split(s, " ")
	if len(parts) != 3 || !isToken(parts[0]) || (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
		return fmt.Errorf("%w: malformed request line %q", errRefused, clip(s))
	}
	h.method, h.target = parts[0], parts[1]
	if strings.ContainsAny(h.target, "#@\\") {
		return fmt.Errorf("%w: %s target %q holds a '#', '@' or '\\', which parsers read differently", errRefused, h.method, clip(h.target))
	}
	if h.method == "CONNECT" {
		host, port, err := splitAuthority(h.target)
		if err != nil {
			return fmt.Errorf("%w: CONNECT target %q: %v", errRefused, clip(h.target), err)
		}
		h.host, h.port = host, port
		return nil
	}
	u, err := url.Parse(h.target)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("%w: %s target %q: want an absolute http:// URI (use CONNECT for https)", errRefused, h.method, clip(h.target))
	}
	host, port := u.Hostname(), 80
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("%w: port %q", errRefused, clip(p))
		}
		port = n
	}
	h.host, h.port = host, port
	return nil
}

// splitAuthority reads "host:port" (CONNECT's target); the port is required.
func splitAuthority(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	n, err := strconv.Atoi(p)
	if err != nil || p == "" || p[0] == '+' || p[0] == '-' {
		return "", 0, errors.New("bad port")
	}
	return host, n, nil
}

// headerLine splits "Name: value", refusing folded lines and spaces before the colon.
func headerLine(s string) (string, string, error) {
	if s[0] == ' ' || s[0] == '\t' {
		return "", "", fmt.Errorf("%w: a folded header line", errRefused)
	}
	name, value, ok := strings.Cut(s, ":")
	if !ok || !isToken(name) {
		return "", "", fmt.Errorf("%w: malformed header line %q", errRefused, clip(s))
	}
	return name, strings.Trim(value, " \t"), nil
}

// sameHost says whether a Host header names the target host:port.
func sameHost(hostHeader, host string, port, defaultPort int) bool {
	hh, hp := hostHeader, defaultPort
	if h, p, err := net.SplitHostPort(hostHeader); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		hh, hp = h, n
	}
	a, err1 := ParseHost(hh)
	b, err2 := ParseHost(host)
	return err1 == nil && err2 == nil && a == b && hp == port
}

// isDecimal says whether s is a non-empty run of at most 18 decimal digits.
func isDecimal(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}
