//go:build linux

package filestamp

import (
	"io/fs"
	"syscall"
)

func changeTime(fi fs.FileInfo) (int64, bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return sys.Ctim.Nano(), true
}
