//go:build unix

package sqlite

import (
	"errors"
	"syscall"
)

// rebuilds reports whether the catalog can be rebuilt apart and renamed
// into place: the rename and the locks it relies on behave as they do on
// Unix.
const rebuilds = true

// processAlive reports whether the process pid may still be running.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
