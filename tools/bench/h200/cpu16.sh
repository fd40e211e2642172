#!/bin/bash
# cpu16.sh PHASE: bonsai beside llama-bench on the device machine's host CPU (16 cores) at 1, 2, 4,
# 8 and 16 threads, on the synthetic 1.7B- and 8B-shaped Q1_0 files, tg128 and pp512, with bonsai's
# tg as a share of the read bandwidth at each thread count (`bench --membw`). llama-bench is built
# CPU-only there from the oracle's llama.cpp v0.5.0 source (.carry/llama/llama-src.tgz); bonsai is
# the binary built here (.carry/gpu/bonsai.gz, or BONSAI_GZ). The phases fit one 10-minute call
# each on a warm machine (what they build and write stays under /tmp):
#   build   llama-bench, bonsai, the two models
#   1.7b    1.7B: tg128 and pp512 at every thread count, the two programs alternating
#   8b-tg   8B: tg128
#   8b-pp   8B: pp512
#   final   old (BONSAI_OLD_GZ, unpacked by build or models) and new bonsai beside llama.cpp at 16
#           threads (8B tg128 twice, 1.7B tg128 and pp512, 8B pp512), then 8B tg128 at 8, 4, 2, 1
#   variants  bonsai, the binaries /tmp/b-NAME for NAME in VARIANTS and llama.cpp, 8B tg128 at 16
#           threads, 3 rounds
#   models  bonsai and the two models only (no llama-bench), for profile
#   profile bonsai alone at 16 threads (1.7B pp512, 8B tg128) and 4 threads (8B tg128) with
#           --cpuprofile, the Go CPU profiles under $OUT (prof-MODEL-TEST-tTHREADS.pb.gz)
# THREADS (default "1 2 4 8 16"), REPS (default 2 for tg, 1 for pp). Each measurement has its own
# timeout, so one slow run costs its figure, not the phase. Results: $OUT/cpu16-PHASE.log.
S=$(date +%s)
exec > >(tee -a "${OUT:-/tmp}/cpu16-$1.log") 2>&1
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
R=$(pwd)
cd /tmp || exit 1
threads=${THREADS:-1 2 4 8 16}
LB=/tmp/llama-cpu/build/bin/llama-bench

# one PROGRAM MODEL THREADS TEST: one measurement, its t/s on one line.
one() {
	local prog=$1 m=$2 n=$3 test=$4 args reps out
	case $test in
	tg) args=(-p 0 -n 128); reps=${REPS:-2} ;;
	pp) args=(-p 512 -n 0); reps=${REPS:-1} ;;
	esac
	if [ "$prog" != llama ]; then
		extra=() bin=/tmp/b
		[ "$test" = tg ] && extra=(--membw)
		[ "$prog" != bonsai ] && bin=/tmp/b-$prog
		out=$(timeout 280 $bin bench --model "$m" --backend cpu --threads "$n" "${args[@]}" -r "$reps" "${extra[@]}" 2>&1)
		echo "$out" | grep -E "^\| .*(tg|pp)[0-9]|^read bandwidth" | sed "s/^/$(printf %-9s "$prog") t=$n /"
	else
		out=$(timeout 280 $LB -m "$m" -t "$n" "${args[@]}" -r "$reps" 2>&1)
		echo "$out" | grep -E "^\| .*(tg|pp)[0-9]" | sed "s/^/llama.cpp t=$n /"
	fi
	[ -n "$out" ] || echo "$prog t=$n $test: no result (timeout or failure)"
}

sweep() { # sweep MODEL TEST: both programs at each thread count, alternating
	for n in $threads; do
		t "$1 $2, $n threads"
		one bonsai "$1" "$n" "$2"
		one llama "$1" "$n" "$2"
	done
}

models() { # the bonsai binary and the two synthetic models
	gunzip -c "$R/${BONSAI_GZ:-.carry/gpu/bonsai.gz}" >/tmp/b && chmod +x /tmp/b || { echo "no bonsai binary"; exit 1; }
	if [ -n "$BONSAI_OLD_GZ" ]; then gunzip -c "$R/$BONSAI_OLD_GZ" >/tmp/b-old && chmod +x /tmp/b-old; fi
	t synth
	[ -f 17.gguf ] || timeout 300 /tmp/b synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 &
	s1=$!
	[ -f 8.gguf ] || timeout 400 /tmp/b synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 &
	s2=$!
	wait $s1 $s2 # never a bare wait: it would also wait for tee's process substitution
}

# prof MODEL TEST THREADS: one bonsai measurement with a Go CPU profile of it
prof() {
	local args
	case $2 in
	tg) args=(-p 0 -n 128) ;;
	pp) args=(-p 512 -n 0) ;;
	esac
	t "profile $1 $2 $3 threads"
	timeout 200 /tmp/b bench --model "$1" --backend cpu --threads "$3" "${args[@]}" -r 2 \
		--cpuprofile "${OUT:-/tmp}/prof-${1%.gguf}-$2-t$3.pb.gz" 2>&1 | grep -E "^\| .*(tg|pp)[0-9]"
}

case $1 in
models)
	lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L3|NUMA node\(s\)"
	models
	ls -la /tmp/17.gguf /tmp/8.gguf
	t done ;;
profile)
	prof 17.gguf pp 16
	prof 8.gguf tg 16
	prof 8.gguf tg 4
	t done ;;
build)
	lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L3|NUMA node\(s\)"
	grep -o -w -E "avx2|avx512f|avx512_vnni|avx512_bf16" /proc/cpuinfo | sort | uniq -c
	mkdir -p /tmp/llama-cpu && tar xzf "$R/.carry/llama/llama-src.tgz" -C /tmp/llama-cpu
	( cd /tmp/llama-cpu && cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
		-DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF \
		-DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_EXAMPLES=OFF >/tmp/cmake-cpu.log 2>&1 &&
	  timeout 500 cmake --build build -j12 --target llama-bench >/tmp/build-cpu.log 2>&1
	  echo "llama.cpp build rc=$?"; tail -3 /tmp/build-cpu.log ) &
	build=$!
	models
	wait $build
	ls -la /tmp/17.gguf /tmp/8.gguf $LB
	t done ;;
1.7b)
	sweep 17.gguf tg
	sweep 17.gguf pp
	t done ;;
8b-tg)
	sweep 8.gguf tg
	t done ;;
8b-pp)
	sweep 8.gguf pp
	t done ;;
variants)
	# VARIANTS (binaries /tmp/b-NAME) beside bonsai and llama.cpp: 8B tg128 at 16 threads, 3 rounds
	for r in 1 2 3; do
		t "8B tg128, 16 threads, round $r"
		for p in bonsai $VARIANTS llama; do one $p 8.gguf 16 tg; done
	done
	t done ;;
final)
	# old (BONSAI_OLD_GZ) and new beside llama.cpp at 16 threads, twice, then the thread sweeps
	for r in 1 2; do
		t "8B tg128, 16 threads, round $r"
		for p in old bonsai llama; do one $p 8.gguf 16 tg; done
	done
	t "1.7B, 16 threads"
	for p in old bonsai llama; do one $p 17.gguf 16 tg; one $p 17.gguf 16 pp; done
	t "8B pp512, 16 threads"
	for p in old bonsai llama; do one $p 8.gguf 16 pp; done
	THREADS="8 4 2 1" sweep 8.gguf tg
	t done ;;
*)
	echo "usage: cpu16.sh build|models|profile|variants|final|1.7b|8b-tg|8b-pp"; exit 2 ;;
esac
