package notebook_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/kernelbox/kernelbox/api"
	"github.com/kernelbox/kernelbox/executor"
	"github.com/kernelbox/kernelbox/notebook"
)

func ExampleNotebook_InjectParameters() {
	nb, err := notebook.Parse([]byte(`{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
	  {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": null, "source": "n = 1"},
	  {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "print(n)"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	var params []notebook.Parameter
	for _, arg := range []string{"n=10", "label=first run", `opts={"fast": true}`} {
		p, err := notebook.ParseAssignment(arg)
		if err != nil {
			log.Fatal(err)
		}
		params = append(params, p)
	}
	if err := nb.InjectParameters(params); err != nil {
		log.Fatal(err)
	}
	fmt.Println(nb.Cells[1].Tags())
	fmt.Print(nb.Cells[1].Source)
	// Output:
	// [injected-parameters]
	// # Parameters
	// n = 10
	// label = "first run"
	// opts = {"fast": True}
}

// Run a notebook in a fresh session of an executor (built with a backend, see package
// executor) and write the executed notebook.
func ExampleRun() {
	var e *executor.Executor // executor.New(executor.Options{Backend: ..., Workspace: ...})
	f, err := os.Open("analysis.ipynb")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	nb, err := notebook.Read(f)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := notebook.Run(context.Background(), e, nb, notebook.RunOptions{
		Parameters: []notebook.Parameter{{Name: "year", Value: notebook.ParseValue("2024")}},
		OnCell: func(c notebook.CellResult) {
			fmt.Printf("cell %d: %s in %s\n", c.Index, c.Status, c.Duration)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	out, err := nb.Encode()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("analysis.out.ipynb", out, 0o644); err != nil {
		log.Fatal(err)
	}
	if rep.Status != api.StatusOK {
		fmt.Printf("cell %d failed: %s: %s\n", *rep.FailedCell, rep.Error.Ename, rep.Error.Evalue)
	}
}
