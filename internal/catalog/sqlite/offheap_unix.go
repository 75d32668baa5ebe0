//go:build unix

package sqlite

import "syscall"

// allocArena returns n bytes of anonymous memory mapped apart from the Go
// heap, for the record cache's arena, or nil when the system has none to
// give. Its pages take memory as they are first written. Free it with
// freeArena.
func allocArena(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// freeArena frees memory of allocArena.
func freeArena(b []byte) {
	if len(b) > 0 {
		syscall.Munmap(b)
	}
}
