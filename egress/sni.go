package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxHelloRecord is the largest TLS record read while looking for a server name.
const maxHelloRecord = 16384 + 256

// maxHello bounds a ClientHello gathered from its records: real ones are a few
// hundred bytes to a few KiB (post-quantum key shares included).
const maxHello = 64 << 10

// errHello marks a tunnel's first bytes the proxy refuses: a TLS handshake it
// cannot read whole within its bounds, or plain HTTP.
var errHello = errors.New("refused")

// readClientHello reads the TLS handshake records that carry the client's first
// handshake message, gathering a ClientHello split over several records (up to
// maxHello bytes), and returns the bytes read, to be sent on untouched, and its
// server name ("" when it has none). Any record that is not a handshake record,
// a record over maxHelloRecord, a message that is not a ClientHello or does not
// parse is refused (errHello): what is sent on is exactly what was judged.
func readClientHello(br *bufio.Reader) (raw []byte, name string, err error) {
	var msg []byte
	for {
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(br, hdr); err != nil {
			return nil, "", fmt.Errorf("incomplete ClientHello: %w", err)
		}
		n := int(binary.BigEndian.Uint16(hdr[3:5]))
		switch {
		case hdr[0] != 0x16 || hdr[1] != 3:
			return nil, "", fmt.Errorf("%w: a record of type %d before the ClientHello was whole", errHello, hdr[0])
		case n == 0 || n > maxHelloRecord:
			return nil, "", fmt.Errorf("%w: a handshake record of %d bytes", errHello, n)
		case len(raw)+5+n > maxHello+5*16:
			return nil, "", fmt.Errorf("%w: a ClientHello over %d bytes", errHello, maxHello)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, "", fmt.Errorf("incomplete ClientHello: %w", err)
		}
		raw = append(append(raw, hdr...), body...)
		msg = append(msg, body...)
		if len(msg) < 4 {
			continue
		}
		total := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
		if total > maxHello {
			return nil, "", fmt.Errorf("%w: a ClientHello of %d bytes; the limit is %d", errHello, total, maxHello)
		}
		if len(msg) < total {
			continue
		}
		name, err := helloServerName(msg[:total])
		if err != nil {
			return nil, "", fmt.Errorf("%w: the first handshake message is not a well-formed ClientHello", errHello)
		}
		return raw, name, nil
	}
}

// looksLikeHTTP reads (without consuming) the tunnel's first bytes and says
// whether they begin an HTTP request line: optional empty lines, then a method
// (letters, '-' or '_') and a space. It waits for more bytes only while the
// answer is open; a timeout then is an error.
func looksLikeHTTP(br *bufio.Reader) (bool, error) {
	const maxMethod = 24
	letters := 0
	for i := 1; i <= maxMethod+8; i++ {
		b, err := br.Peek(i)
		if err != nil {
			return false, err
		}
		c := b[i-1]
		switch {
		case (c == '\r' || c == '\n') && letters == 0:
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '-', c == '_':
			letters++
			if letters > maxMethod {
				return false, nil
			}
		case c == ' ' && letters > 0:
			return true, nil
		default:
			return false, nil
		}
	}
	return false, nil
}

var errShort = errors.New("short ClientHello")

// helloServerName parses a handshake message holding a ClientHello.
func helloServerName(b []byte) (string, error) {
	r := reader(b)
	typ, ok1 := r.u8()
	_, ok2 := r.bytes(3) // length; the caller gave the whole message
	if !ok1 || !ok2 || typ != 1 {
		return "", errShort
	}
	if _, ok := r.bytes(2 + 32); !ok { // version, random
		return "", errShort
	}
	for _, lenBytes := range []int{1, 2, 1} { // session id, cipher suites, compression
		if _, ok := r.vec(lenBytes); !ok {
			return "", errShort
		}
	}
	if len(r) == 0 {
		return "", nil // no extensions
	}
	exts, ok := r.vec(2)
	if !ok || len(r) != 0 {
		return "", errShort
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		body, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", errShort
		}
		if typ != 0 {
			continue
		}
		list, ok := body.vec(2)
		for ok && len(list) > 0 {
			kind, _ := list.u8()
			host, ok2 := list.vec(2)
			if !ok2 {
				return "", errShort
			}
			if kind == 0 {
				return string(host), nil
			}
		}
		return "", errShort
	}
	return "", nil
}

// reader is a cursor over bytes.
type reader []byte

func (r *reader) bytes(n int) ([]byte, bool) {
	if len(*r) < n {
		return nil, false
	}
	b := (*r)[:n]
	*r = (*r)[n:]
	return b, true
}

func (r *reader) u8() (byte, bool) {
	b, ok := r.bytes(1)
	if !ok {
		return 0, false
	}
	return b[0], true
}

func (r *reader) u16() (uint16, bool) {
	b, ok := r.bytes(2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}

// vec reads a vector with a big-endian length of lenBytes bytes.
func (r *reader) vec(lenBytes int) (reader, bool) {
	lb, ok := r.bytes(lenBytes)
	if !ok {
		return nil, false
	}
	n := 0
	for _, c := range lb {
		n = n<<8 | int(c)
	}
	b, ok := r.bytes(n)
	return reader(b), ok
}
