package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
)

// maxHelloRecord is the largest TLS record read while looking for a server name.
const maxHelloRecord = 16384 + 256

// peekServerName looks at the first TLS record the client sent after CONNECT and
// returns the ClientHello's server name. It only peeks: the bytes stay in br and
// are passed on untouched. ok is false when the bytes are not a TLS ClientHello in
// one record (then nothing is known about the name); name is "" when a ClientHello
// has no server_name extension.
func peekServerName(br *bufio.Reader) (name string, ok bool, err error) {
	hdr, err := br.Peek(5)
	if err != nil {
		return "", false, err
	}
	if hdr[0] != 0x16 || hdr[1] != 3 {
		return "", false, nil
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if n > maxHelloRecord || 5+n > br.Size() {
		return "", false, nil
	}
	rec, err := br.Peek(5 + n)
	if err != nil {
		return "", false, err
	}
	name, err = helloServerName(rec[5:])
	if err != nil {
		return "", false, nil
	}
	return name, true, nil
}

var errShort = errors.New("short ClientHello")

// helloServerName parses a handshake message holding a ClientHello.
func helloServerName(b []byte) (string, error) {
	r := reader(b)
	typ, ok1 := r.u8()
	_, ok2 := r.bytes(3) // length; the record may hold the whole message only
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
	exts, ok := r.vec(2)
	if !ok {
		return "", nil
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
