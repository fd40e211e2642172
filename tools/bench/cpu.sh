#!/usr/bin/env bash
# cpu.sh: the CPU benchmark of BENCHMARKS.md's CPU sections. bonsai (`bonsai
# bench`) and llama-bench built here from the oracle's bundled llama.cpp
# v0.5.0 source, on the same synthetic
# Bonsai-shaped files, alternating the two programs ROUNDS times so that both
# see the same load on a shared machine, and printing per round the speeds,
# their ratio and bonsai's tg as a share of the read bandwidth (`bonsai
# bench --membw`, measured in the same run at the same thread count).
#
#   bash tools/bench/cpu.sh [DIR] [THREADS] [ROUNDS]
#
# DIR (default ./bench-models) holds the models and bonsai's binary.
# Sections (SECTIONS, default "q1 types avx2 portable"):
#   q1       1.7B and 4B Q1_0, tg128 and pp512
#   types    1.7B Q4_0, Q8_0, Q4_K, Q6_K, tg128 and pp512
#   avx2     AVX-512 off: bonsai --cpu-features avx2 beside llama-bench built
#            with -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF, on 1.7B
#            Q1_0, Q4_0, Q8_0 and Q4_K
#   portable bonsai's pure-Go kernels (--cpu-features portable), 1.7B Q4_0
#            and Q1_0 tg, beside native llama-bench (what an unknown CPU gets)
#   q4km     Llama-3.2-1B- and Gemma-3-1B-shaped files in llama-quantize's
#            Q4_K_M mix (synth --type q4_k_m), tg128 and pp512 (not in the
#            default SECTIONS)
# LLAMA_DIR (default /tmp/llama-cpubw) is llama.cpp's source tree, cloned
# from tools/oracle's bundle when missing; its build (native) and
# build-avx2 folders are made when missing. TESTS (default "tg pp"), REPS
# (repetitions per program per round, default 2), TG and PP (tokens, default
# 128 and 512).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
dir=${1:-bench-models}
threads=${2:-2}
rounds=${3:-3}
sections=${SECTIONS:-q1 types avx2 portable}
tests=${TESTS:-tg pp}
reps=${REPS:-2}
tg=${TG:-128}
pp=${PP:-512}
llama=${LLAMA_DIR:-/tmp/llama-cpubw}
mkdir -p "$dir"
say() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }

go build -o "$dir/bonsai" ./cmd/bonsai

# llama_build NAME CMAKE-FLAGS...: llama-bench in $llama/NAME, built once.
llama_build() {
	local name=$1
	shift
	[[ -x $llama/$name/bin/llama-bench ]] && return
	if [[ ! -f $llama/CMakeLists.txt ]]; then
		git clone -q "$root/tools/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$llama"
	fi
	say "building llama-bench ($name: $*)"
	cmake -S "$llama" -B "$llama/$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF "$@" >"$llama/$name.cmake.log"
	cmake --build "$llama/$name" -j"$(nproc)" --target llama-bench >"$llama/$name.build.log"
}
llama_build build -DGGML_NATIVE=ON
if [[ " $sections " == *" avx2 "* ]]; then
	llama_build build-avx2 -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
		-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF
fi

model() { # model SHAPE TYPE [ARCH]: the file, synthesized once
	local arch=${3:-qwen3}
	local f=$dir/$1-$2.gguf
	[[ $arch == qwen3 ]] || f=$dir/$arch-$1-$2.gguf
	[[ -f $f ]] || "$dir/bonsai" synth --arch "$arch" --shape "$1" --type "$2" -o "$f" >/dev/null
	echo "$f"
}

# pair LABEL FILE TEST FEATURES LLAMA-BUILD: ROUNDS rounds of bonsai then
# llama-bench on one test (tg: -n $tg; pp: -p $pp).
summary=()
pair() {
	local label=$1 f=$2 test=$3 features=$4 lb=$5 args ratios=() r
	case $test in
	tg) args=(-p 0 -n "$tg") ;;
	pp) args=(-p "$pp" -n 0) ;;
	esac
	for ((r = 1; r <= rounds; r++)); do
		local bj lj b l pct=""
		bj=$("$dir/bonsai" bench --model "$f" --threads "$threads" "${args[@]}" -r "$reps" --format json \
			--cpu-features "$features" $([[ $test == tg ]] && echo --membw))
		lj=$("$llama/$lb/bin/llama-bench" -m "$f" -t "$threads" "${args[@]}" -r "$reps" -o jsonl 2>/dev/null)
		b=$(grep -o '"avg_tps": [0-9.e+-]*' <<<"$bj" | head -1 | awk '{print $2}')
		l=$(grep -o '"avg_ts": *[0-9.e+-]*' <<<"$lj" | head -1 | awk -F: '{print $2}')
		if [[ $test == tg ]]; then
			pct=$(awk -v p="$(grep -o '"pct_read_bw": [0-9.e+-]*' <<<"$bj" | awk '{print $2}')" \
				-v bw="$(grep -o '"read_bw_bytes_per_s": [0-9.e+-]*' <<<"$bj" | awk '{print $2}')" \
				-v bpt="$(grep -o '"bytes_per_token": [0-9.e+-]*' <<<"$bj" | awk '{print $2}')" \
				'BEGIN { printf "  %.0f%% of %.1f GB/s read bandwidth (%.0f MB/token)", p, bw/1e9, bpt/1e6 }')
		fi
		ratios+=("$(awk -v b="$b" -v l="$l" 'BEGIN { printf "%.2f", b/l }')")
		printf '%-28s %s%-4s round %d: bonsai %7.2f t/s  llama.cpp %7.2f t/s  ratio %s%s\n' \
			"$label" "$test" "$([[ $test == tg ]] && echo "$tg" || echo "$pp")" "$r" "$b" "$l" "${ratios[-1]}" "$pct"
	done
	summary+=("$(printf '%-28s %s: ratios %s' "$label" "$test" "${ratios[*]}")")
}

say "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs, $threads threads, $rounds rounds × $reps reps"
for s in $sections; do
	case $s in
	q1)
		for shape in 1.7b 4b; do
			f=$(model "$shape" q1_0)
			for t in $tests; do pair "$shape q1_0" "$f" "$t" all build; done
		done ;;
	types)
		for ty in q4_0 q8_0 q4_k q6_k; do
			f=$(model 1.7b "$ty")
			for t in $tests; do pair "1.7b $ty" "$f" "$t" all build; done
		done ;;
	avx2)
		for ty in q1_0 q4_0 q8_0 q4_k; do
			f=$(model 1.7b "$ty")
			for t in $tests; do pair "1.7b $ty avx2-only" "$f" "$t" avx2 build-avx2; done
		done ;;
	portable)
		for ty in q1_0 q4_0; do
			pair "1.7b $ty bonsai-portable" "$(model 1.7b "$ty")" tg portable build
		done ;;
	q4km)
		for arch in llama gemma3; do
			f=$(model 1b q4_k_m "$arch")
			for t in $tests; do pair "$arch 1b Q4_K_M" "$f" "$t" all build; done
		done ;;
	*) echo "cpu.sh: unknown section $s" >&2; exit 2 ;;
	esac
done
say "summary (bonsai / llama.cpp per round)"
printf '%s\n' "${summary[@]}"
