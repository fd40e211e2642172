#!/bin/bash
# go test ./infer/gpu N times in a row (default 10) with two busy loops beside it, as on a busy
# 2-core CI machine: CI=true, so a missing adapter fails instead of skipping. Prints one line per run
# and "passed K of N"; exits non-zero unless every run passed. Run from the repository root.
set -u
n=${1:-10}
bin=$(mktemp -d)/gpu.test
go test -c -o "$bin" ./infer/gpu || exit 1
( while :; do :; done ) & b1=$!
( while :; do :; done ) & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT
pass=0
for i in $(seq 1 "$n"); do
	s=$(date +%s)
	(cd infer/gpu && CI=true "$bin" -test.count=1 -test.timeout 20m >"$bin.$i.log" 2>&1)
	rc=$?
	echo "run $i: rc=$rc, $(($(date +%s) - s)) s (log $bin.$i.log)"
	[ $rc = 0 ] && pass=$((pass + 1))
done
echo "passed $pass of $n"
[ "$pass" = "$n" ]
