package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
)

// flagSet is one command's flags, in groups that -h prints under their headings
// ("Engine:", "Server:", "Backend docker:", ...). A command adds only the groups it
// uses; package flag alone prints one flat list.
type flagSet struct {
	*flag.FlagSet
	// intro is printed above the flags: the usage line and what the command does.
	intro string
	// show says whether -h prints a group's flags; nil shows every group. A hidden
	// group is named on one line at the end, with hideNote.
	show     func(title string) bool
	hideNote string

	groups []flagGroup
}

// flagGroup is a heading and the flags registered under it.
type flagGroup struct {
	title string
	names []string
}

// newFlags returns a command's flag set, which reports errors instead of exiting
// and prints its groups for -h.
func newFlags(name string, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("kernelbox "+name, flag.ContinueOnError)}
	fs.SetOutput(stderr)
	fs.intro = "Usage: kernelbox " + name + " [flags]"
	fs.Usage = func() { fs.printUsage(fs.Output()) }
	return fs
}

// add registers a group of flags under title. Flags a command registers outside
// any group are printed first, under "Flags:".
func (s *flagSet) add(title string, register func(*flag.FlagSet)) {
	before := map[string]bool{}
	s.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	register(s.FlagSet)
	g := flagGroup{title: title}
	s.VisitAll(func(f *flag.Flag) {
		if !before[f.Name] {
			g.names = append(g.names, f.Name)
		}
	})
	s.groups = append(s.groups, g)
}

// ungrouped returns the flags registered outside add.
func (s *flagSet) ungrouped() []string {
	in := map[string]bool{}
	for _, g := range s.groups {
		for _, n := range g.names {
			in[n] = true
		}
	}
	var names []string
	s.VisitAll(func(f *flag.Flag) {
		if !in[f.Name] {
			names = append(names, f.Name)
		}
	})
	return names
}

// printUsage prints the intro and then each group under its heading: one line per
// flag, its name and argument, its usage and its default when that is not the
// zero value. No blank line between groups: `kernelbox run -h` must fit on one
// screen (TestRunHelpFitsOneScreen).
func (s *flagSet) printUsage(w io.Writer) {
	fmt.Fprintln(w, s.intro)
	fmt.Fprintln(w)
	groups := s.groups
	if names := s.ungrouped(); len(names) > 0 {
		groups = append([]flagGroup{{title: "Flags", names: names}}, groups...)
	}
	var shown, hidden []flagGroup
	for _, g := range groups {
		if s.show == nil || s.show(g.title) {
			shown = append(shown, g)
		} else {
			hidden = append(hidden, g)
		}
	}
	width := 0
	for _, g := range shown {
		for _, n := range g.names {
			width = max(width, len(flagHead(s.Lookup(n))))
		}
	}
	for _, g := range shown {
		fmt.Fprintf(w, "%s:\n", g.title)
		for _, n := range g.names {
			f := s.Lookup(n)
			_, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  %-*s  %s%s\n", width, flagHead(f), usage, defaultNote(f))
		}
	}
	if len(hidden) > 0 {
		titles := make([]string, len(hidden))
		for i, g := range hidden {
			titles[i] = g.title
		}
		fmt.Fprintf(w, "Not shown: %s%s\n", strings.Join(titles, ", "), s.hideNote)
	}
}

// flagHead is "-name ARG", ARG as package flag names it (empty for a bool).
func flagHead(f *flag.Flag) string {
	arg, _ := flag.UnquoteUsage(f)
	return strings.TrimSpace("-" + f.Name + " " + arg)
}

// defaultNote is " (default X)", or "" when the default is the type's zero
// value, as package flag prints it. A token's default is never printed: it comes
// from the environment (KERNELBOX_TOKEN), and help text ends up in terminals,
// screenshots and logs.
func defaultNote(f *flag.Flag) string {
	if f.Name == "token" || strings.HasSuffix(f.Name, "-token") {
		return ""
	}
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	if zv, ok := z.Interface().(flag.Value); ok && zv.String() == f.DefValue {
		return ""
	}
	if t.String() == "*flag.stringValue" {
		return fmt.Sprintf(" (default %q)", f.DefValue)
	}
	return fmt.Sprintf(" (default %s)", f.DefValue)
}

// parse parses flags, turning -h into a clean exit and bad flags into exit code 2.
func parse(fs *flagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitCode{0, ""}
		}
		return exitCode{2, ""}
	}
	return nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// hostsFlag is a repeatable NAME=ADDR[,ADDR...] flag: a name map.
type hostsFlag map[string][]netip.Addr

func (h *hostsFlag) String() string {
	var s []string
	for name, addrs := range *h {
		for _, a := range addrs {
			s = append(s, name+"="+a.String())
		}
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func (h *hostsFlag) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	if !ok || name == "" || list == "" {
		return fmt.Errorf("%q: want NAME=ADDR[,ADDR...]", v)
	}
	if *h == nil {
		*h = hostsFlag{}
	}
	for _, s := range strings.Split(list, ",") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		(*h)[strings.ToLower(name)] = append((*h)[strings.ToLower(name)], a)
	}
	return nil
}

// envOr is the environment variable key, or def when it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
