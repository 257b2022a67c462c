package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/client"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/httpapi"
	"github.com/kernelbox/kernelbox/workspace"
)

// New takes an http(s) URL or a unix socket path.
func ExampleNew() {
	for _, server := range []string{"http://127.0.0.1:8700", "unix:/run/kernelbox.sock", "127.0.0.1:8700"} {
		_, err := client.New(server, &client.Options{Token: os.Getenv("KERNELBOX_TOKEN")})
		fmt.Println(server, err == nil)
	}
	// Output:
	// http://127.0.0.1:8700 true
	// unix:/run/kernelbox.sock true
	// 127.0.0.1:8700 false
}

// Execute runs code in a session; later calls with the same session id see its
// variables. It needs a running `kernelbox serve --backend docker` (or local), so
// this example is compiled but not run.
func ExampleClient_Execute() {
	c, err := client.New("http://127.0.0.1:8700", &client.Options{Token: os.Getenv("KERNELBOX_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Execute(ctx, api.Request{SessionID: "analysis", Code: "x = 41"}); err != nil {
		log.Fatal(err)
	}
	res, err := c.Execute(ctx, api.Request{SessionID: "analysis", Code: "x + 1"})
	if err != nil {
		log.Fatal(err) // the call did not run: denied, invalid, overloaded...
	}
	fmt.Println(res.Status, res.Result) // ok 42
	for _, a := range res.Artifacts {
		fmt.Println("artifact:", a.Name, a.Path)
	}
}

// ExecuteStream prints output as the kernel produces it. Like ExampleClient_Execute
// it needs a running server.
func ExampleClient_ExecuteStream() {
	c, err := client.New("http://127.0.0.1:8700", nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.ExecuteStream(context.Background(), api.Request{
		SessionID: "analysis",
		Code:      "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(1)",
	}, func(ev api.Event) {
		if ev.Type == "stream" {
			fmt.Print(ev.Text) // 0, 1, 2, a second apart
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)
}

// Errors from the server match the executor's sentinel errors with errors.Is. This
// server has no backend, so every call fails with api.ErrDisabled.
func ExampleAPIError() {
	dir, err := os.MkdirTemp("", "kernelbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.New(workspace.Options{Root: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	e, err := executor.New(executor.Options{Workspace: ws})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Workspace: ws}))
	defer srv.Close()

	c, err := client.New(srv.URL, nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Execute(context.Background(), api.Request{SessionID: "s1", Code: "1 + 1"})
	var apiErr *client.APIError
	fmt.Println(errors.Is(err, api.ErrDisabled), errors.As(err, &apiErr) && apiErr.StatusCode == 503)
	// Output:
	// true true
}
