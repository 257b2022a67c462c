package workspace_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/workspace"
)

// ExampleManager_Open stages an input into a new session, lets "the code" write an
// output, and collects it as an artifact.
func ExampleManager_Open() {
	tmp, err := os.MkdirTemp("", "kernelbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)

	m, err := workspace.New(workspace.Options{Root: filepath.Join(tmp, "kb")})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.Open("analysis-1")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// The permission engine has approved this host file.
	src := filepath.Join(tmp, "sales.csv")
	if err := os.WriteFile(src, []byte("region,total\nnorth,10\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	staged, err := s.Stage([]workspace.Input{{Name: "sales.csv", Source: src, Requested: "~/sales.csv"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("staged inputs/%s (%d bytes)\n", staged[0].Name, staged[0].Size)

	// The kernel runs with s.Dir() as its working directory and writes outputs/.
	out := filepath.Join(s.Dir(), "outputs", "summary.json")
	if err := os.WriteFile(out, []byte(`{"north":10}`), 0o644); err != nil {
		log.Fatal(err)
	}

	arts, err := s.Collect()
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range arts {
		fmt.Println("artifact", a.Name, a.Size, a.MIME)
	}
	arts, _ = s.Collect()
	fmt.Println("new on the next collect:", len(arts))
	// Output:
	// staged inputs/sales.csv (22 bytes)
	// artifact summary.json 12 application/json
	// new on the next collect: 0
}
