#!/usr/bin/env bash
# test.sh: bonsai's whole test run, the same here and in CI.
#   1. installs missing test dependencies (.ci/install: apt packages when
#      root, the llama.cpp oracle under tools/oracle);
#   2. go vet ./..., staticcheck ./..., and the CPU-only static build
#      (CGO_ENABLED=0) cross-compiled for linux, darwin and windows on
#      amd64 and arm64;
#   3. go test ./... (parity tests included: against stored llama.cpp
#      goldens, and live against llama.cpp where the oracle is installed),
#      parity again with the AVX2 kernels (AVX-512 off) on an AVX2 CPU,
#      then infer/quant's and infer/cpu's tests built for arm64 and run
#      under qemu-aarch64 (the NEON kernels), where it is installed;
#   4. every fuzz target for FUZZTIME each (default 15s: 26 targets).
# Environment: FUZZTIME (e.g. 10s, or 0 to skip fuzzing), TEST_TIMEOUT
# (go test -timeout, default 20m), CI=true (missing oracle fails).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH=$PATH:/usr/local/go/bin
fi
fuzztime=${FUZZTIME:-15s}
timeout=${TEST_TIMEOUT:-20m}
step() { echo; echo "== $* ($((SECONDS))s)"; }

step install
.ci/install

step go vet
go vet ./...

step staticcheck
"$(go env GOPATH)/bin/staticcheck" ./...

# The CPU-only static build (no cgo, so no WebGPU) must build for every
# platform bonsai ships to; unix-only calls have their other-OS files.
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	step "CGO_ENABLED=0 build for $target"
	CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} go build -o /dev/null ./cmd/bonsai
done

step go test
go test -timeout "$timeout" ./...

# Parity again with bonsai's AVX-512 kernels off, where the CPU has AVX2:
# the kernels most desktops run must match llama.cpp as the default ones do.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
	step "parity with --cpu-features avx2"
	go test -count=1 -timeout "$timeout" ./infer/parity -args -cpu-features avx2
fi

# The NEON kernels, on an x86 machine: the arm64 test binaries under
# qemu-user (emulating a CPU with the dot-product extension; the tests
# also run the plain-NEON variants directly). -test.short keeps it to a
# minute or two. CI installs qemu-user; elsewhere it is skipped if missing.
if [[ $(go env GOARCH) != arm64 ]]; then
	if command -v qemu-aarch64 >/dev/null 2>&1; then
		arm64dir=$(mktemp -d)
		for pkg in infer/quant infer/cpu; do
			step "arm64 tests of $pkg under qemu-aarch64"
			GOARCH=arm64 go test -c -o "$arm64dir/test" "./$pkg"
			(cd "$pkg" && qemu-aarch64 "$arm64dir/test" -test.short -test.timeout=10m)
		done
		rm -rf "$arm64dir"
	elif [[ ${CI:-} == true ]]; then
		echo "test.sh: qemu-aarch64 missing (.ci/install installs qemu-user)" >&2
		exit 1
	else
		echo "note: qemu-aarch64 not installed, arm64 kernel tests skipped"
	fi
fi

# fuzz_target fuzzes one target. Go 1.26's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" when the -fuzztime deadline
# races its workers' shutdown (golang/go#75804, fixed in Go 1.27). A real
# finding always writes its input under testdata/fuzz, so that failure
# counts as a pass only when no new input was written and the target's
# corpus (seeds and testdata) still replays cleanly.
corpus_sum() { { ls -R "$1" 2>/dev/null || true; } | md5sum; }
fuzz_target() {
	local name=$1 pkg=$2 log before
	log=$(mktemp)
	before=$(corpus_sum "$pkg/testdata/fuzz/$name")
	if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -fuzzminimizetime=100x "$pkg" 2>&1 | tee "$log"; then
		rm -f "$log"
		return 0
	fi
	if grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'Failing input written' "$log" &&
		[[ $(corpus_sum "$pkg/testdata/fuzz/$name") == "$before" ]] &&
		go test -run="^${name}\$" "$pkg"; then
		echo "note: $name hit Go's fuzz-deadline race (golang/go#75804), no failing input; corpus replays cleanly"
		rm -f "$log"
		return 0
	fi
	rm -f "$log"
	return 1
}

if [[ $fuzztime != 0 ]]; then
	# Each package's Fuzz functions, one at a time (go test fuzzes one target
	# per run). The seed corpora already ran as unit tests above.
	while IFS=: read -r file _ decl; do
		name=${decl#func }
		name=${name%%(*}
		pkg=./$(dirname "$file")
		step "fuzz $name in $pkg for $fuzztime"
		fuzz_target "$name" "$pkg"
	done < <(grep -rn --exclude-dir=node_modules --exclude-dir=.git --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sed 's|^\./||' | sort)
fi
step "all tests passed"
