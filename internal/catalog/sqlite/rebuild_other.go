//go:build !unix

package sqlite

// rebuilds reports whether the catalog can be rebuilt apart and renamed
// into place: elsewhere than on Unix an open file cannot be renamed over.
const rebuilds = false

// processAlive reports whether the process pid may still be running.
func processAlive(pid int) bool { return true }
