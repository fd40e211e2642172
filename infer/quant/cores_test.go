package quant

import (
	"runtime"
	"testing"
)

func TestPhysicalCores(t *testing.T) {
	n := PhysicalCores()
	if n < 1 || n > runtime.NumCPU() {
		t.Fatalf("PhysicalCores() = %d with runtime.NumCPU() = %d", n, runtime.NumCPU())
	}
	// Hyperthreads come in sibling pairs at most per core on the machines
	// this runs on; a count below half the CPUs would mean a bad parse.
	if 2*n < runtime.NumCPU() && runtime.GOOS == "linux" {
		t.Errorf("PhysicalCores() = %d of %d CPUs: fewer than one per sibling pair", n, runtime.NumCPU())
	}
	t.Logf("%d physical cores of %d CPUs", n, runtime.NumCPU())
}
