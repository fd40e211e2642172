//go:build !cgo || nogpu

package main

import (
	"errors"
	"io"
)

// A build without cgo (CGO_ENABLED=0, a static binary for machines without a
// C compiler) or with the nogpu tag has no WebGPU backend: the chat and every
// command run on the CPU, and `bonsai gpu` says why it has nothing to show.
func init() {
	register(command{
		name:    "gpu",
		summary: "WebGPU adapters (not in this build: CPU only)",
		run: func([]string, io.Writer, io.Writer) error {
			return errNoGPUBuild
		},
	})
}

var errNoGPUBuild = errors.New("this bonsai was built without the WebGPU backend (CGO_ENABLED=0 or -tags nogpu): it runs on the CPU only")
