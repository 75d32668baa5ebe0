// Command patchline runs the Patchline services, its agent and its tools.
// See the README for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(run(ctx, env, os.Args[1:]))
}

// Env is what a subcommand may touch of the process, so tests can run
// subcommands in-process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// command is one subcommand.
type command struct {
	usage string // one line: flags and arguments
	run   func(ctx context.Context, env *Env, args []string) error
}

// commands is filled by the init functions of the subcommand files.
var commands = map[string]command{}

// errUsage makes run print the usage of the subcommand and exit 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "patchline: unknown command %q\n\n", args[0])
		printUsage(env.Stderr)
		return 2
	}
	err := cmd.run(ctx, env, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "usage: patchline %s %s\n", args[0], cmd.usage)
		return 2
	}
	var exit *exitError
	if errors.As(err, &exit) {
		fmt.Fprintf(env.Stderr, "patchline %s: %v\n", args[0], err)
		return exit.code
	}
	fmt.Fprintf(env.Stderr, "patchline %s: %v\n", args[0], err)
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: patchline COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].usage)
	}
}

// newFlags returns a flag set for a subcommand that writes its errors and
// usage to env.Stderr.
func newFlags(name string, env *Env) *flag.FlagSet {
	fs := flag.NewFlagSet("patchline "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	return fs
}

// parseFlags parses args into fs, then fills every flag not given on the
// command line from the environment variable PATCHLINE_<FLAG> (upper case,
// dashes as underscores), so --catalog-db reads PATCHLINE_CATALOG_DB.
func parseFlags(fs *flag.FlagSet, env *Env, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := "PATCHLINE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env.Getenv(name); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
	})
	return err
}
