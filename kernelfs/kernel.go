package kernelfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kernelbox/kernelbox/jupyter"
)

// The kernel side of file sync is kernelsync.py, installed in each kernel as a module
// of its own and driven through user_expressions of silent execute requests:
//
//   - silent=True and store_history=False leave the user's execution_count, In/Out
//     history and _ untouched, and the code is empty, so no cell hooks run;
//   - the answer comes back in the execute_reply on the shell channel, which Jupyter
//     Server does not rate-limit (iopub is limited to 1 MB/s by default);
//   - bulk data rides in an extra "kernelbox" field of the request's content, which
//     the module reads from the request being handled (IPython's public
//     get_ipython().get_parent()), so a 4 MiB chunk is never compiled as Python
//     source (compiling a 4 MiB string literal takes 65 ms; with the v1 WebSocket
//     protocol Jupyter Server does not even parse the content). Kernels that do not
//     expose the request get the data as a literal instead.

// The module's source: kernelsync.py (file sync) with kernelfiles.py (the
// files API) appended, run as one module.
var kernelSource = syncSource + "\n" + filesSource

//go:embed kernelsync.py
var syncSource string

//go:embed kernelfiles.py
var filesSource string

// moduleName is unique to the source, so that a kernel never runs an older copy.
var moduleName = func() string {
	sum := sha256.Sum256([]byte(kernelSource))
	return modulePrefix + hex.EncodeToString(sum[:6])
}()

// installExpr installs the module: the source is executed in a fresh module that
// is then registered in sys.modules; nothing lands in the user's namespace.
var installExpr = "(lambda m: (exec(__import__('base64').b64decode('" +
	base64.StdEncoding.EncodeToString([]byte(kernelSource)) +
	"').decode('utf-8'), m.__dict__), __import__('sys').modules.__setitem__(m.__name__, m), 'installed')[-1])" +
	"(__import__('types').ModuleType('" + moduleName + "'))"

// Kernel is the typed client of the kernel side of file sync in one kernel process
// (see ops.go for the operations). The connection is lent to each call and never
// kept. The data-moving operations are safe for concurrent use (several chunks in
// flight); Setup must not run concurrently with other operations.
type Kernel struct {
	seq     atomic.Uint64 // payload sequence numbers
	literal atomic.Bool   // the kernel cannot read payloads from the request
}

// Literal reports whether payloads travel as Python literals, because the kernel
// did not let the module read the request being handled (known after Setup).
func (k *Kernel) Literal() bool { return k.literal.Load() }

// Sent returns how many payloads have been sent.
func (k *Kernel) Sent() uint64 { return k.seq.Load() }

// execContent is an execute_request's content. A payload goes in an extra
// "kernelbox" field, {"seq": N, "data": base64}, written by withPayload.
type execContent struct {
	jupyter.ExecuteRequest
}

// envelope is what call() in kernelsync.py decodes: the operation, its arguments and
// the sequence number of its payload (0: none).
type envelope struct {
	Op   string `json:"op"`
	Seq  uint64 `json:"seq,omitempty"`
	Args any    `json:"args"`
}

// exprStatus is how a user expression's evaluation ended.
type exprStatus struct {
	Status string `json:"status"`
	Ename  string `json:"ename"`
	Evalue string `json:"evalue"`
}

// exprResult is one user expression's answer.
type exprResult struct {
	exprStatus
	Data map[string]string `json:"data"`
}

// KernelError is a file-sync operation that failed inside the kernel.
type KernelError struct {
	Op     string // the operation, for example "wput"
	Ename  string // the Python exception's class
	Evalue string // its message
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("kernel %s: %s: %s", e.Op, e.Ename, e.Evalue)
}

// ErrNotSetUp is returned (wrapped in a KernelError's place) when the kernel process
// has not been set up: it is new or was restarted.
var ErrNotSetUp = errors.New("the session directory is not set up in the kernel")

var (
	errNotInstalled = errors.New("file-sync module not installed in the kernel")
	errReplyTooBig  = errors.New("the kernel's reply exceeded the connection's message limit")
)

// callExpr returns the expression that runs op with args in the kernel. The
// arguments travel base64-encoded, so nothing in them can leave the string literal.
func callExpr(e envelope) (string, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	return "__import__('" + moduleName + "').call('" + base64.StdEncoding.EncodeToString(raw) + "')", nil
}

// call runs one operation of the kernel-side module, installing the module first if
// the kernel lacks it (a new or restarted kernel process). data, when non-nil, is the
// operation's payload. The JSON answer is decoded into out.
func (k *Kernel) call(ctx context.Context, conn *jupyter.Conn, op string, args any, data []byte, out any) error {
	err := k.call1(ctx, conn, op, args, data, out)
	if errors.Is(err, errNotInstalled) {
		if err = k.install(ctx, conn); err != nil {
			return err
		}
		err = k.call1(ctx, conn, op, args, data, out)
	}
	return err
}

func (k *Kernel) call1(ctx context.Context, conn *jupyter.Conn, op string, args any, data []byte, out any) error {
	e := envelope{Op: op, Args: args}
	content := execContent{ExecuteRequest: jupyter.ExecuteRequest{Silent: true, UserExpressions: map[string]string{}}}
	literal := k.literal.Load()
	if data != nil {
		e.Seq = k.seq.Add(1)
	}
	expr, err := callExpr(e)
	if err != nil {
		return err
	}
	if data != nil && literal {
		// call(args, data): base64 needs no escaping in a Python string literal.
		expr = strings.TrimSuffix(expr, ")") + ",'" + base64.StdEncoding.EncodeToString(data) + "')"
	}
	content.UserExpressions["r"] = expr
	if data == nil || literal {
		return k.exec(ctx, conn, op, content, out)
	}
	raw, err := withPayload(content, e.Seq, data)
	if err != nil {
		return err
	}
	return k.exec(ctx, conn, op, raw, out)
}

// withPayload returns content with the payload seq carrying data, whose base64
// is written straight to the socket as the request goes out (a 1 MiB chunk used
// to be copied four times on its way out: base64 string, content, message,
// frame; the server's memory grew with each chunk in flight).
func withPayload(content execContent, seq uint64, data []byte) (*jupyter.Base64Content, error) {
	head, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	if len(head) < 2 || head[len(head)-1] != '}' {
		return nil, fmt.Errorf("encode request: not a JSON object: %.40q", head)
	}
	head = append(head[:len(head)-1], `,"kernelbox":{"seq":`...)
	head = strconv.AppendUint(head, seq, 10)
	head = append(head, `,"data":"`...)
	return &jupyter.Base64Content{Head: head, Data: data, Tail: []byte(`"}}`)}, nil
}

// install runs the module's source in the kernel.
func (k *Kernel) install(ctx context.Context, conn *jupyter.Conn) error {
	content := execContent{ExecuteRequest: jupyter.ExecuteRequest{Silent: true, UserExpressions: map[string]string{"r": installExpr}}}
	var answer string
	if err := k.exec(ctx, conn, "install", content, rawText(&answer)); err != nil {
		return fmt.Errorf("install the file-sync module in the kernel (it must be an IPython kernel): %w", err)
	}
	return nil
}

// rawText makes exec store the text/plain answer as is instead of decoding JSON.
type rawText *string

// base64Data makes exec decode the text/plain answer as standard base64 (straight
// from the reply's bytes: a chunk of megabytes is not copied into a string first).
type base64Data *[]byte

// replyText is a user expression's text/plain answer, kept as a string or, when
// decode is set, decoded from base64.
type replyText struct {
	decode bool
	text   string
	data   []byte
	found  bool
}

// UnmarshalJSON is handed the JSON string as it appears in the reply.
func (t *replyText) UnmarshalJSON(b []byte) error {
	t.found = true
	if !t.decode {
		return json.Unmarshal(b, &t.text)
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("text/plain is not a string: %.40q", b)
	}
	raw := b[1 : len(b)-1]
	if bytes.IndexByte(raw, '\\') >= 0 { // escaped: unquote first (never seen)
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		raw = []byte(s)
	}
	t.data = make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
	n, err := base64.StdEncoding.Decode(t.data, raw)
	t.data = t.data[:n]
	return err
}

// exec sends one silent execute_request and decodes the answer of its user
// expression "r".
func (k *Kernel) exec(ctx context.Context, conn *jupyter.Conn, op string, content any, out any) error {
	m, err := conn.Request(ctx, jupyter.ChannelShell, "execute_request", content)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", op, err)
	}
	if m.Truncated {
		return fmt.Errorf("kernel %s: %w", op, errReplyTooBig)
	}
	// One decoding pass over a reply that may carry megabytes of base64.
	_, decode := out.(base64Data)
	r := &replyExpr{Data: replyData{Text: &replyText{decode: decode}}}
	reply := struct {
		Status          string `json:"status"`
		Ename           string `json:"ename"`
		Evalue          string `json:"evalue"`
		UserExpressions struct {
			R *replyExpr `json:"r"`
		} `json:"user_expressions"`
	}{}
	reply.UserExpressions.R = r
	if err := m.DecodeContent(&reply); err != nil {
		return fmt.Errorf("kernel %s: decode reply: %w", op, err)
	}
	if reply.Status != "ok" {
		return &KernelError{Op: op, Ename: firstNonEmpty(reply.Ename, reply.Status), Evalue: reply.Evalue}
	}
	if r.Status == "" {
		return fmt.Errorf("kernel %s: the reply has no user expression result (not an IPython kernel?)", op)
	}
	if r.Status != "ok" {
		return exprError(op, r.exprStatus)
	}
	t := r.Data.Text
	if !t.found {
		return fmt.Errorf("kernel %s: the result has no text/plain", op)
	}
	switch o := out.(type) {
	case rawText:
		*o = t.text
		return nil
	case base64Data:
		*o = t.data
		return nil
	case nil:
		return nil
	}
	if err := json.Unmarshal([]byte(t.text), out); err != nil {
		return fmt.Errorf("kernel %s: decode answer %.80q: %w", op, t.text, err)
	}
	return nil
}

// replyExpr is the user expression "r" of an execute_reply, decoded in place.
type replyExpr struct {
	exprStatus
	Data replyData `json:"data"`
}

type replyData struct {
	Text *replyText `json:"text/plain"`
}

// exprError classifies a failed user expression.
func exprError(op string, r exprStatus) error {
	switch {
	case (r.Ename == "ModuleNotFoundError" || r.Ename == "ImportError") && strings.Contains(r.Evalue, moduleName):
		return errNotInstalled
	case r.Ename == "NotSetUp":
		return fmt.Errorf("kernel %s: %w", op, ErrNotSetUp)
	}
	return &KernelError{Op: op, Ename: r.Ename, Evalue: r.Evalue}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
