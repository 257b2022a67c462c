package docker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kernelbox/kernelbox/backends/docker"
	"github.com/kernelbox/kernelbox/executor"
)

// A backend places each session in its own container; the placement tells the
// executor where that container's Jupyter server listens.
func ExampleNew() {
	ctx := context.Background()
	b, err := docker.New(ctx, docker.Options{Memory: 1 << 30})
	if err != nil {
		log.Fatal(err) // errors.Is(err, docker.ErrNoImage): build the image first
	}
	defer b.Close(ctx)

	p, err := b.Open(ctx, executor.SessionSpec{ID: "s1", Dir: "/var/lib/kernelbox/sessions/s1"})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	srv := p.Server()
	fmt.Println("Jupyter Server on", srv.Endpoint.Socket)
}
