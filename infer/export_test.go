package infer

// SetHostMemory makes the memory check see avail bytes (ok false: unknown)
// until the returned function restores the machine's figure.
func SetHostMemory(avail int64, ok bool) (restore func()) {
	saved := hostMemory
	hostMemory = func() (int64, bool) { return avail, ok }
	return func() { hostMemory = saved }
}

// ParseMemAvailable exposes the /proc/meminfo parser.
var ParseMemAvailable = parseMemAvailable
