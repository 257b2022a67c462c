package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/kernelbox/kernelbox/jupyterapi"
)

// closeGateway disconnects the Jupyter gateway's clients once the executor has
// stopped, and waits (boundedly) for the calls they started.
func closeGateway(g *jupyterapi.Gateway, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Close(ctx); err != nil {
		log.Warn("closing the Jupyter gateway", "err", err)
	}
}
