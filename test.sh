#!/usr/bin/env bash
# test.sh: bonsai's whole test run, the same here and in CI.
#   1. installs missing test dependencies (.ci/install: apt packages when
#      root, the llama.cpp oracle under tools/oracle);
#   2. go vet ./...;
#   3. go test ./... (parity tests included: against stored llama.cpp
#      goldens, and live against llama.cpp where the oracle is installed);
#   4. every fuzz target for FUZZTIME each (default 30s).
# Environment: FUZZTIME (e.g. 10s, or 0 to skip fuzzing), TEST_TIMEOUT
# (go test -timeout, default 20m), CI=true (missing oracle fails).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH=$PATH:/usr/local/go/bin
fi
fuzztime=${FUZZTIME:-30s}
timeout=${TEST_TIMEOUT:-20m}
step() { echo; echo "== $* ($((SECONDS))s)"; }

step install
.ci/install

step go vet
go vet ./...

step go test
go test -timeout "$timeout" ./...

if [[ $fuzztime != 0 ]]; then
	# Each package's Fuzz functions, one at a time (go test fuzzes one target
	# per run). The seed corpora already ran as unit tests above.
	while IFS=: read -r file _ decl; do
		name=${decl#func }
		name=${name%%(*}
		pkg=./$(dirname "$file")
		step "fuzz $name in $pkg for $fuzztime"
		go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"
	done < <(grep -rn --exclude-dir=node_modules --exclude-dir=.git --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sed 's|^\./||' | sort)
fi
step "all tests passed"
