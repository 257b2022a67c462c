//go:build !linux

package diskimage

import "errors"

// Images need Linux loop devices; New fails elsewhere.

func tools() (mkfs, mount string, err error) {
	return "", "", errors.New("disk images need Linux loop devices")
}

func (s *Set) makeImage(img string, size int64) error { return errors.ErrUnsupported }
func (s *Set) attach(img, dir string) error           { return errors.ErrUnsupported }

// LoopOf finds no loop device here.
func LoopOf(img string) (string, bool) { return "", false }

// Unmount cannot unmount here.
func Unmount(dir string) error { return errors.ErrUnsupported }

// BindMount cannot mount here.
func BindMount(src, dst string) error { return errors.ErrUnsupported }

// MountsBelow finds no mounts here.
func MountsBelow(dir string) []string { return nil }
