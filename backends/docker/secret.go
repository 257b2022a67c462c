package docker

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/internal/serverflags"
)

// configDirName is the directory, below the socket directory, that the container's
// JUPYTER_CONFIG_DIR points at. It holds jupyter_server_config.json with the server's
// token, so that the token is never on a command line (the host's ps and /proc, and
// the container's) nor in the container's Config.Cmd or Env (docker inspect).
const configDirName = "config"

// writeTokenConfig writes the server's token into dir/jupyter_server_config.json.
// When kernelbox is root the file is root-owned with group gid and mode 0440 (the
// server, running as the kernel's user, reads it through its group; it cannot
// rewrite it); otherwise it is 0400 and owned by kernelbox's user, whom the kernel
// runs as. Either way no other host user reaches it: the socket root is 0700.
func writeTokenConfig(dir, token string, chown bool, gid int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	body, err := serverflags.TokenConfig(token)
	if err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	p := filepath.Join(dir, "jupyter_server_config.json")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	if chown {
		err = f.Chown(os.Geteuid(), gid)
		if err == nil {
			err = f.Chmod(0o440)
		}
	}
	if err == nil {
		_, err = f.Write(body)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("server config: %w", err)
	}
	return nil
}
