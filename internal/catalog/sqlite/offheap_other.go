//go:build !unix

package sqlite

// allocArena returns n bytes for the record cache's arena: on the Go heap, where
// the system has no anonymous mappings of the unix kind.
func allocArena(n int) []byte { return make([]byte, n) }

// freeArena frees memory of allocArena: the collector does.
func freeArena([]byte) {}
