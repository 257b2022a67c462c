package calls_test

import (
	"context"
	"fmt"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/calls"
)

// A call runs in the background; a reader follows its log from the start (or
// after any seq it has seen) and then reads its final answer.
func Example() {
	// Any Runner works; *executor.Executor is the real one.
	runner := runFunc(func(ctx context.Context, req api.Request, onEvent func(api.Event)) (*api.Result, error) {
		onEvent(api.Event{Type: "stream", Name: "stdout", Text: "hello\n"})
		onEvent(api.Event{Type: "stream", Name: "stdout", Text: "world\n"})
		return &api.Result{SessionID: req.SessionID, Status: api.StatusOK, Stdout: "hello\nworld\n"}, nil
	})
	reg := calls.New(runner, calls.Options{})
	defer reg.Close()

	c, err := reg.Start(context.Background(), api.Request{SessionID: "demo", Code: "print('hello'); print('world')"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var after int64
	for {
		b, err := c.Read(context.Background(), after)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, ev := range b.Events {
			fmt.Printf("%d %s %q\n", ev.Seq, ev.Type, ev.Text)
		}
		after = b.Last(after)
		if b.Done {
			break
		}
	}
	res, _ := c.Final()
	fmt.Println(res.Status)
	// Output:
	// 1 stream "hello\n"
	// 2 stream "world\n"
	// ok
}
