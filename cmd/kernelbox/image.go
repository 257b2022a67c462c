package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kernelbox/kernelbox/backends/docker"
)

const imageUsage = "usage: kernelbox image build [--force] [--image NAME] [--with r [--r-image NAME]]"

func imageCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "build" {
		return exitCode{2, imageUsage}
	}
	fs := newFlags("image build", stderr)
	image := fs.String("image", docker.DefaultImage, "image name to build")
	force := fs.Bool("force", false, "rebuild even if the image exists")
	with := fs.String("with", "", `also build a language's image on top of it: "r" (R and IRkernel, kernel "ir")`)
	rImage := fs.String("r-image", docker.RImage, "name of the R image --with r builds")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	switch *with {
	case "", "r":
	default:
		return exitCode{2, fmt.Sprintf("image build: --with %q: the only language image is \"r\"\n%s", *with, imageUsage)}
	}
	if err := docker.BuildImage(ctx, *image, *force, stdout, stderr); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	if *with == "r" {
		if err := docker.BuildRImage(ctx, *rImage, *image, *force, stdout, stderr); err != nil {
			return fmt.Errorf("build image: %w", err)
		}
	}
	return nil
}
