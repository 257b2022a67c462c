package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"
)

// writes records each Write it gets.
type writes struct {
	got [][]byte
	err error
}

func (w *writes) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.got = append(w.got, bytes.Clone(b))
	return len(b), nil
}

// A batchWriter passes writes through while no batch is open, gathers a
// batch's writes into one (bounded by maxBatch), and reports a failed write
// of a batch at its end and on every write after.
func TestBatchWriter(t *testing.T) {
	w := &writes{}
	b := &batchWriter{w: w}
	b.Write([]byte("alone"))
	if len(w.got) != 1 {
		t.Fatalf("a write without a batch waits: %q", w.got)
	}
	b.begin()
	for range 3 {
		b.Write([]byte("record"))
	}
	if len(w.got) != 1 {
		t.Fatalf("a batch's writes went out before its end: %q", w.got)
	}
	if err := b.end(); err != nil || len(w.got) != 2 || string(w.got[1]) != "recordrecordrecord" {
		t.Fatalf("end: %v %q", err, w.got)
	}
	b.begin()
	big := make([]byte, maxBatch/2+1)
	b.Write(big)
	b.Write(big)
	if len(w.got) != 3 || len(w.got[2]) != len(big) {
		t.Fatalf("a batch past maxBatch writes what gathered first: %d writes", len(w.got))
	}
	b.end()
	if len(w.got) != 4 {
		t.Fatalf("end wrote the rest: %d writes", len(w.got))
	}
	if b.buf != nil {
		t.Fatal("the batch's buffer is held after end")
	}
	w.err = errors.New("peer gone")
	b.begin()
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatalf("a gathered write fails only when written: %v", err)
	}
	if err := b.end(); err == nil {
		t.Fatal("end did not report the failed write")
	}
	if _, err := b.Write([]byte("y")); err == nil {
		t.Fatal("a write after a failed batch succeeded")
	}
}

// holdConn passes writes through until hold is set; then it keeps them.
type holdConn struct {
	net.Conn
	hold bool
	kept []byte
}

func (h *holdConn) Write(b []byte) (int, error) {
	if h.hold {
		h.kept = append(h.kept, b...)
		return len(b), nil
	}
	return h.Conn.Write(b)
}

// An idleReader returns in one read every TLS record that has arrived, and
// no more: a record only partly arrived stays for the next read, which waits
// for the rest, and the connection keeps working after it.
func TestIdleReaderTakesWhatArrived(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.leaf("api.test")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc := <-accepted
	defer sc.Close()
	hc := &holdConn{Conn: sc}
	srv := tls.Server(hc, &tls.Config{Certificates: []tls.Certificate{*leaf}})
	ahead := &aheadReader{br: bufio.NewReaderSize(cc, readAhead)}
	cli := tls.Client(&countConn{Conn: cc, r: ahead, w: cc}, &tls.Config{ServerName: "api.test", RootCAs: roots})
	shook := make(chan error, 1)
	go func() { shook <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-shook; err != nil {
		t.Fatal(err)
	}
	r := &idleReader{r: cli, conn: cc, idle: 10 * time.Second, ahead: ahead}
	hc.hold = true
	const rec = 1000
	for range 4 {
		srv.Write(bytes.Repeat([]byte("x"), rec))
	}
	// Three records and half the fourth arrive.
	per := len(hc.kept) / 4
	sc.Write(hc.kept[:3*per+per/2])
	time.Sleep(100 * time.Millisecond)
	buf := make([]byte, 64<<10)
	n, err := r.Read(buf)
	if err != nil || n != 3*rec {
		t.Fatalf("first read: %d bytes, %v; want the 3 records that arrived (%d bytes)", n, err, 3*rec)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		sc.Write(hc.kept[3*per+per/2:])
	}()
	if n, err := r.Read(buf); err != nil || n != rec {
		t.Fatalf("second read: %d bytes, %v; want the fourth record once its rest arrived", n, err)
	}
	hc.hold = false
	srv.Write([]byte("later"))
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "later" {
		t.Fatalf("third read: %q, %v", buf[:n], err)
	}
}
