//go:build unix && !linux

package workspace

import (
	"errors"
)

// Session disks need Linux loop devices; elsewhere only EnforceDiskQuota holds
// sessions to Options.DiskQuota.

func diskTools() (mkfs, mount string, err error) {
	return "", "", errors.New("session disks need Linux loop devices")
}

func (d *disks) makeDisk(img string, size int64) error { return errors.ErrUnsupported }
func (d *disks) attach(img, dir string) error          { return errors.ErrUnsupported }
func detach(dir string) error                          { return errors.ErrUnsupported }
func bindMount(src, dst string) error                  { return errors.ErrUnsupported }
func mountsBelow(dir string) []string                  { return nil }
func loopOf(img string) (string, bool)                 { return "", false }
