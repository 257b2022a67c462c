package main

import (
	"cmp"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/kernelbox/kernelbox/workspace"
)

// Defaults of the disk flags.
const (
	defaultDiskQuota         = 4 << 30 // 4 GiB per session
	defaultMaxArtifactsBytes = 8 << 30 // 8 GiB for the artifacts directory
)

// diskFlags bound what sessions may keep on the host's disk.
type diskFlags struct {
	quota        byteSize
	maxArtifacts byteSize
	onClose      string
	kept         int
}

func (f *diskFlags) register(fs *flag.FlagSet) {
	f.quota, f.maxArtifacts = defaultDiskQuota, defaultMaxArtifactsBytes
	fs.Var(&f.quota, "disk-quota", "disk space per session directory, e.g. 4GiB (0 = no limit); as root each session gets a loop-mounted ext4 of this size, otherwise the excess is deleted after each call")
	fs.Var(&f.maxArtifacts, "max-artifacts-bytes", "total size of the artifacts directory, all sessions together (0 = no limit); artifacts past it are refused with a note on the call")
	fs.StringVar(&f.onClose, "artifacts-on-close", "keep", "what closing a session does to its artifacts: keep or delete")
	fs.IntVar(&f.kept, "max-kept-sessions", workspace.DefaultMaxKeptSessions, "with --disk-quota: how many closed (idle) sessions keep their files and disk image for their next call, unmounted; past it the one closed longest ago is deleted (0 = none)")
}

// apply sets the workspace options the flags control.
func (f *diskFlags) apply(o *workspace.Options) error {
	switch f.onClose {
	case "keep":
	case "delete":
		o.RemoveArtifacts = true
	default:
		return fmt.Errorf("--artifacts-on-close: %q is neither keep nor delete", f.onClose)
	}
	o.DiskQuota, o.MaxKeptSessions = int64(f.quota), cmp.Or(f.kept, -1) // the flag's 0 is the option's "none"
	o.MaxArtifactsTotalBytes = int64(f.maxArtifacts)
	return nil
}

// byteSize is a flag holding a size in bytes, written as a number with an
// optional unit: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB
// (powers of 1000); K, M, G, T are the binary ones.
type byteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return fmt.Errorf("%q is not a size (e.g. 4GiB, 512MiB, 0)", s)
	}
	*b = byteSize(n * float64(mult))
	return nil
}

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
