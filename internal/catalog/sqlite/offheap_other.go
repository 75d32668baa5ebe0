//go:build !unix

package sqlite

// allocBody returns n bytes for the record cache: on the Go heap, where
// the system has no anonymous mappings of the unix kind.
func allocBody(n int) []byte { return make([]byte, n) }

// freeBody frees memory of allocBody: the collector does.
func freeBody([]byte) {}
