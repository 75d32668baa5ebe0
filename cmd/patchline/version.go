package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func init() {
	commands["version"] = command{usage: "", run: runVersion}
}

func runVersion(ctx context.Context, env *Env, args []string) error {
	fs := newFlags("version", env)
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	v := version
	if info, ok := debug.ReadBuildInfo(); ok && v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	fmt.Fprintf(env.Stdout, "patchline %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
