package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/patchline/patchline/internal/apikey"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
	"github.com/patchline/patchline/internal/device"
)

func init() {
	commands["enroll"] = command{
		usage: "create [--expires DURATION] [--ring NAME] | list | revoke ID  [--data DIR] [--control-db DSN]",
		run:   runEnroll,
	}
}

func runEnroll(ctx context.Context, env *Env, args []string) error {
	return runControlCommand(ctx, env, args, enrollCreate(), enrollList, enrollRevoke)
}

func enrollCreate() controlCommand {
	var expires, ring, secret string
	var e *device.EnrollSecret
	return controlCommand{
		name: "enroll create",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&expires, "expires", "", "lifetime, e.g. 168h or 7d (default: until revoked)")
			fs.StringVar(&ring, "ring", "", "deployment ring of the agents it enrolls")
		},
		check: func(env *Env) error {
			now := time.Now().UTC()
			secret = apikey.NewSecret(device.EnrollSecretPrefix)
			e = &device.EnrollSecret{
				ID:         device.NewID(device.EnrollSecretIDPrefix),
				SecretHash: apikey.HashSecret(secret),
				Ring:       ring,
				CreatedBy:  cliActor(env),
				CreatedAt:  now,
			}
			if ring != "" {
				if err := device.CheckRingName(ring); err != nil {
					return err
				}
			}
			if expires != "" {
				d, err := parseLifetime(expires)
				if err != nil {
					return fmt.Errorf("--expires %w", err)
				}
				t := now.Add(d)
				e.ExpiresAt = &t
			}
			return nil
		},
		run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
			if err := store.CreateEnrollSecret(ctx, e); err != nil {
				return err
			}
			if err := appendAdminAudit(ctx, store, env, audit.EnrollSecretCreated{ID: e.ID, Ring: e.Ring, ExpiresAt: e.ExpiresAt}); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "created enrollment secret %s, expires %s.\nThis is the only time the secret is shown: give it to the agents now.\n",
				e.ID, formatOptionalTime(e.ExpiresAt))
			fmt.Fprintln(env.Stdout, secret)
			return nil
		},
	}
}

var enrollList = controlCommand{
	name: "enroll list",
	run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
		secrets, err := store.FindEnrollSecrets(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tRING\tSTATE\tUSES\tCREATED BY\tCREATED\tLAST USED\tEXPIRES")
		for _, e := range secrets {
			state := "active"
			switch {
			case e.RevokedAt != nil:
				state = "revoked"
			case !e.Usable(now):
				state = "expired"
			}
			ring := e.Ring
			if ring == "" {
				ring = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.ID, ring, state, e.Uses, e.CreatedBy,
				formatOptionalTime(&e.CreatedAt), formatOptionalTime(e.LastUsedAt), formatOptionalTime(e.ExpiresAt))
		}
		return tw.Flush()
	},
}

var enrollRevoke = controlCommand{
	name: "enroll revoke",
	args: 1,
	run: func(ctx context.Context, env *Env, store control.Store, pos []string) error {
		e, err := store.RevokeEnrollSecret(ctx, pos[0], time.Now())
		if err != nil {
			return err
		}
		if err := appendAdminAudit(ctx, store, env, audit.EnrollSecretRevoked{ID: e.ID}); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked enrollment secret %s; agents enrolled with it keep their credentials\n", e.ID)
		return nil
	},
}
