package main

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/patchline/patchline/internal/audit"
)

func init() {
	commands["audit"] = command{
		usage: "verify  [--data DIR] [--control-db DSN]",
		run:   runAudit,
	}
}

func runAudit(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return errUsage
	}
	var c controlFlags
	fs := newFlags("audit verify", env)
	bindControlFlags(fs, &c)
	pos, err := parseArgs(fs, env, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return errUsage
	}
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	res, err := audit.Verify(ctx, store)
	if err != nil {
		return err
	}
	if res.Broken != nil {
		return fmt.Errorf("the audit log is broken at entry %d: %s (the %d entries before it verify)", res.Broken.ID, res.Broken.Reason, res.Entries)
	}
	fmt.Fprintf(env.Stdout, "audit log verified: %d entries, chain intact, head %s\n", res.Entries, hex.EncodeToString(res.Head))
	return nil
}
