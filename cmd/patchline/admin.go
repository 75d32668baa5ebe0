package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/patchline/patchline/internal/admin"
	"github.com/patchline/patchline/internal/audit"
)

func init() {
	commands["admin"] = command{
		usage: "create --email EMAIL --password-stdin  [--data DIR] [--control-db DSN]",
		run:   runAdmin,
	}
}

func runAdmin(ctx context.Context, env *Env, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		return errUsage
	}
	var c controlFlags
	var email string
	var passwordStdin bool
	fs := newFlags("admin create", env)
	bindControlFlags(fs, &c)
	fs.StringVar(&email, "email", "", "email address of the administrator (required)")
	fs.BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of standard input")
	pos, err := parseArgs(fs, env, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 || email == "" {
		return errUsage
	}
	if !passwordStdin {
		return errors.New("pass --password-stdin and the password on standard input: a password on the command line would end up in the shell history and the process list")
	}
	email, err = admin.CheckEmail(email)
	if err != nil {
		return err
	}
	password, err := readPassword(env.Stdin)
	if err != nil {
		return err
	}
	if err := admin.CheckPassword(password); err != nil {
		return err
	}
	store, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	a := &admin.Admin{ID: admin.NewID(), Email: email, PasswordHash: admin.HashPassword(password), CreatedAt: time.Now().UTC()}
	if err := store.CreateAdmin(ctx, a); err != nil {
		return err
	}
	if err := appendAdminAudit(ctx, store, env, audit.AdminCreated{Email: a.Email}); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "created administrator %s\n", a.Email)
	return nil
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
