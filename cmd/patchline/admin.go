package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/audit"
	"github.com/patchline/patchline/internal/control"
)

func init() {
	commands["admin"] = command{
		usage: "create --email EMAIL --password-stdin  [--data DIR] [--control-db DSN]",
		run:   runAdmin,
	}
}

func runAdmin(ctx context.Context, env *Env, args []string) error {
	return runControlCommand(ctx, env, args, adminCreate())
}

func adminCreate() controlCommand {
	var email, password string
	var passwordStdin bool
	return controlCommand{
		name: "admin create",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&email, "email", "", "email address of the administrator (required)")
			fs.BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of standard input")
		},
		check: func(env *Env) error {
			if email == "" {
				return errUsage
			}
			if !passwordStdin {
				return errors.New("pass --password-stdin and the password on standard input: a password on the command line would end up in the shell history and the process list")
			}
			var err error
			if email, err = admin.CheckEmail(email); err != nil {
				return err
			}
			if password, err = readPassword(env.Stdin); err != nil {
				return err
			}
			return admin.CheckPassword(password)
		},
		run: func(ctx context.Context, env *Env, store control.Store, _ []string) error {
			a := &admin.Admin{ID: admin.NewID(), Email: email, PasswordHash: admin.HashPassword(password), CreatedAt: time.Now().UTC()}
			if err := store.CreateAdmin(ctx, a); err != nil {
				return err
			}
			if err := appendAdminAudit(ctx, store, env, audit.AdminCreated{Email: a.Email}); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "created administrator %s\n", a.Email)
			return nil
		},
	}
}

// readPassword reads the first line of r, without its line ending.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("read password: standard input is empty")
	}
	return line, nil
}
