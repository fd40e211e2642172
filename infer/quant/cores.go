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
// default to one thread per core. Elsewhere, or when sysfs says nothing
// usable, it is runtime.NumCPU().
func PhysicalCores() int {
	n := runtime.NumCPU()
	allowed := allowedCPUs()
	if len(allowed) == 0 {
		return n
	}
	cores := map[string]bool{}
	for _, cpu := range allowed {
		dir := filepath.Join("/sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "topology")
		pkg, err1 := os.ReadFile(filepath.Join(dir, "physical_package_id"))
		core, err2 := os.ReadFile(filepath.Join(dir, "core_id"))
		if err1 != nil || err2 != nil {
			return n
		}
		cores[strings.TrimSpace(string(pkg))+"/"+strings.TrimSpace(string(core))] = true
	}
	return max(1, min(n, len(cores)))
}
