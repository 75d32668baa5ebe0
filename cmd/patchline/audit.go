package main

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
)

func init() {
	commands["audit"] = command{
		usage: "verify  [--data DIR] [--control-db DSN]",
		run:   runAudit,
	}
}

func runAudit(ctx context.Context, env *Env, args []string) error {
	return runControlCommand(ctx, env, args, auditVerify)
}

var auditVerify = controlCommand{
	name: "audit verify",
	run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
		res, err := audit.Verify(ctx, store)
		if err != nil {
			return err
		}
		if res.Broken != nil {
			return fmt.Errorf("the audit log is broken at entry %d: %s (the %d entries before it verify)", res.Broken.ID, res.Broken.Reason, res.Entries)
		}
		fmt.Fprintf(env.Stdout, "audit log verified: %d entries, chain intact, head %s\n", res.Entries, hex.EncodeToString(res.Head))
		return nil
	},
}
