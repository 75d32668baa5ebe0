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
)

func init() {
	commands["keys"] = command{
		usage: "create --name NAME [--privileged --expires DURATION] | list | revoke KEYID  [--data DIR] [--control-db DSN]",
		run:   runKeys,
	}
}

func runKeys(ctx context.Context, env *Env, args []string) error {
	return runControlCommand(ctx, env, args, keysCreate(), keysList, keysRevoke)
}

func keysCreate() controlCommand {
	var name, expires string
	var privileged bool
	var full string
	var k *apikey.Key
	return controlCommand{
		name: "keys create",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&name, "name", "", "what the key is for (required)")
			fs.BoolVar(&privileged, "privileged", false, "allow the privileged operations (needs --expires)")
			fs.StringVar(&expires, "expires", "", fmt.Sprintf("lifetime, e.g. 720h or 30d (required with --privileged, at most %s)", apikey.FormatLifetime(apikey.MaxPrivilegedLifetime)))
		},
		check: func(env *Env) error {
			if name == "" {
				return errUsage
			}
			if privileged && expires == "" {
				return fmt.Errorf("a privileged key needs --expires (at most %s)", apikey.FormatLifetime(apikey.MaxPrivilegedLifetime))
			}
			now := time.Now()
			p := apikey.Params{Name: name, CreatedBy: cliActor(env), Privileged: privileged}
			if expires != "" {
				d, err := parseLifetime(expires)
				if err != nil {
					return fmt.Errorf("--expires %w", err)
				}
				t := now.Add(d)
				p.ExpiresAt = &t
			}
			var err error
			full, k, err = apikey.New(p, now)
			return err
		},
		run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
			if err := store.CreateKey(ctx, k); err != nil {
				return err
			}
			if err := appendAdminAudit(ctx, store, env, audit.KeyCreated{KeyID: k.ID, Name: k.Name, Privileged: k.Privileged, ExpiresAt: k.ExpiresAt}); err != nil {
				return err
			}
			kind := "key"
			if k.Privileged {
				kind = "privileged key"
			}
			fmt.Fprintf(env.Stderr, "created %s %s (%q), expires %s.\nThis is the only time the full key is shown: store it now.\n",
				kind, k.ID, k.Name, formatOptionalTime(k.ExpiresAt))
			fmt.Fprintln(env.Stdout, full)
			return nil
		},
	}
}

var keysList = controlCommand{
	name: "keys list",
	run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
		keys, err := store.FindKeys(ctx, apikey.KeyFilter{})
		if err != nil {
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY ID\tNAME\tPRIVILEGED\tSTATE\tCREATED BY\tCREATED\tLAST USED\tEXPIRES")
		for _, k := range keys {
			priv := "no"
			if k.Privileged {
				priv = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, priv, k.State(now), k.CreatedBy,
				formatOptionalTime(&k.CreatedAt), formatOptionalTime(k.LastUsedAt), formatOptionalTime(k.ExpiresAt))
		}
		return tw.Flush()
	},
}

var keysRevoke = controlCommand{
	name: "keys revoke",
	args: 1,
	run: func(ctx context.Context, env *Env, store control.Store, pos []string) error {
		k, err := store.RevokeKey(ctx, pos[0], time.Now())
		if err != nil {
			return err
		}
		if err := appendAdminAudit(ctx, store, env, audit.KeyRevoked{KeyID: k.ID}); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked %s (%q); requests with it now get 401\n", k.ID, k.Name)
		return nil
	},
}
