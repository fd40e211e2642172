package quant

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// TestPhysicalCoresTopology reads made-up sysfs trees: hyperthread
// pairs count once, a hybrid part's efficiency cores count (one thread
// each), an affinity set that holds one sibling of a pair counts that
// core once, and kernels without core_cpus_list fall back to package and
// core ids.
func TestPhysicalCoresTopology(t *testing.T) {
	type cpu struct {
		siblings        string // core_cpus_list; "" for none
		pkg, core       int
		noIDs, noFolder bool
	}
	for _, tc := range []struct {
		name    string
		cpus    []cpu
		allowed []int
		want    int
	}{
		{"smt pairs", []cpu{{siblings: "0,2"}, {siblings: "1,3"}, {siblings: "0,2"}, {siblings: "1,3"}}, []int{0, 1, 2, 3}, 2},
		{"smt ranges", []cpu{{siblings: "0-1"}, {siblings: "0-1"}, {siblings: "2-3"}, {siblings: "2-3"}}, []int{0, 1, 2, 3}, 2},
		// 2 P-cores with hyperthreads (CPUs 0-3), 4 E-cores (4-7).
		{"hybrid", []cpu{{siblings: "0-1"}, {siblings: "0-1"}, {siblings: "2-3"}, {siblings: "2-3"},
			{siblings: "4"}, {siblings: "5"}, {siblings: "6"}, {siblings: "7"}}, []int{0, 1, 2, 3, 4, 5, 6, 7}, 6},
		{"affinity", []cpu{{siblings: "0,2"}, {siblings: "1,3"}, {siblings: "0,2"}, {siblings: "1,3"}}, []int{0, 2}, 1},
		{"ids only", []cpu{{pkg: 0, core: 0}, {pkg: 0, core: 1}, {pkg: 1, core: 0}, {pkg: 1, core: 0}}, []int{0, 1, 2, 3}, 3},
		{"unreadable", []cpu{{siblings: "0"}, {noFolder: true}}, []int{0, 1}, 99},
		{"no ids", []cpu{{noIDs: true}}, []int{0}, 99},
		{"no affinity", []cpu{{siblings: "0"}}, nil, 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for i, c := range tc.cpus {
				if c.noFolder {
					continue
				}
				dir := filepath.Join(root, "cpu"+strconv.Itoa(i), "topology")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				write := func(name, v string) {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if c.siblings != "" {
					write("core_cpus_list", c.siblings)
				}
				if !c.noIDs {
					write("physical_package_id", strconv.Itoa(c.pkg))
					write("core_id", strconv.Itoa(c.core))
				}
			}
			if got := physicalCores(root, tc.allowed, 99); got != tc.want {
				t.Fatalf("physicalCores = %d, want %d", got, tc.want)
			}
		})
	}
}
