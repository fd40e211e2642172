//go:build linux || darwin || freebsd

package cpu

import (
	"os"

	"golang.org/x/sys/unix"
)

// releasePages tells the kernel this process no longer needs the whole
// pages inside b, a read-only file mapping: they leave the resident set and
// fault back in from the file if read again. It returns the bytes released.
func releasePages(b []byte) int64 {
	page := os.Getpagesize()
	start, end := 0, len(b)
	if off := int(uintptrOf(b) % uintptr(page)); off != 0 {
		start = page - off
	}
	end -= int((uintptrOf(b) + uintptr(end)) % uintptr(page))
	if end-start < page {
		return 0
	}
	if err := unix.Madvise(b[start:end], unix.MADV_DONTNEED); err != nil {
		return 0 // only a missed saving
	}
	return int64(end - start)
}
