package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kernelbox/kernelbox/backends/docker"
)

func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "build" {
		return exitCode{2, "usage: kernelbox image build [--force] [--image NAME]"}
	}
	fs := newFlags("image build", stderr)
	image := fs.String("image", docker.DefaultImage, "image name to build")
	force := fs.Bool("force", false, "rebuild even if the image exists")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := docker.BuildImage(ctx, *image, *force, stdout, stderr); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	return nil
}
