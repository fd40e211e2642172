package quant

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// PhysicalCores is the number of physical cores this process may run on:
// the CPUs of its affinity set (runtime.NumCPU) with hyperthread siblings
// counted once, from Linux's sysfs topology. Two threads on one core's
// siblings share its SIMD units and only contend, so the matrix kernels
// default to one thread per core. Efficiency cores (Intel's hybrid parts,
// Arm's big.LITTLE) count like the others: the pool's chunks are claimed
// dynamically, so a slower core simply finishes fewer of them, and the
// decode (bound by memory, not by the cores) and the prompt (bound by the
// cores, where every core adds) both gain from it. Elsewhere, or when sysfs
// says nothing usable, it is runtime.NumCPU().
func PhysicalCores() int {
	n := runtime.NumCPU()
	return max(1, min(n, physicalCores("/sys/devices/system/cpu", allowedCPUs(), n)))
}

// physicalCores counts the distinct cores of the allowed CPUs under a
// sysfs cpu directory: by each CPU's list of hardware threads on its core
// (core_cpus_list, thread_siblings_list on older kernels), or by package
// and core id. It returns fallback when the topology cannot be read.
func physicalCores(sysCPU string, allowed []int, fallback int) int {
	if len(allowed) == 0 {
		return fallback
	}
	cores := map[string]bool{}
	for _, cpu := range allowed {
		dir := filepath.Join(sysCPU, "cpu"+strconv.Itoa(cpu), "topology")
		key, ok := coreKey(dir)
		if !ok {
			return fallback
		}
		cores[key] = true
	}
	return len(cores)
}

// coreKey names the physical core of the CPU whose topology directory is
// dir.
func coreKey(dir string) (string, bool) {
	for _, f := range []string{"core_cpus_list", "thread_siblings_list"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return "siblings " + strings.TrimSpace(string(b)), true
		}
	}
	pkg, err1 := os.ReadFile(filepath.Join(dir, "physical_package_id"))
	core, err2 := os.ReadFile(filepath.Join(dir, "core_id"))
	if err1 != nil || err2 != nil {
		return "", false
	}
	return strings.TrimSpace(string(pkg)) + "/" + strings.TrimSpace(string(core)), true
}
