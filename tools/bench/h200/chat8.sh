#!/bin/bash
# chat8.sh: the chat's own decoding path on the H200. `bonsai run --temp 0` (greedy: the engine runs its
# steps chained, infer.Chain) against the same with --top-logits 1 (every step's logits wanted on the host:
# plain steps), on the synthetic 8B and 1.7B Q1_0 files, 2 rounds alternating, with prompt lookup on (the
# default) and off; decode tok/s from --format jsonl's last object. Then `bonsai gpu`'s plain and chained
# lines for the same files. Carried: .gl/ and .carry/gpu5/new.xz (bonsai built with -ldflags="-s -w" and
# an empty embedded default model). Results: $OUT/chat8.log.
S=$(date +%s)
exec > >(tee "${OUT:-/tmp}/chat8.log") 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)" "$1"; }
[ -x /tmp/new ] || { unxz .carry/gpu5/new.xz >/tmp/new && chmod +x /tmp/new; }
cd /tmp
[ -f 8.gguf ] || /tmp/new synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & s8=$!
[ -f 17.gguf ] || /tmp/new synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & s17=$!
wait $s8 $s17 # never a bare wait: it would also wait for tee's process substitution
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
for m in 8 17; do
	for spec in ngram off; do
		for r in 1 2; do
			for mode in chained plain; do
				extra=()
				[ $mode = plain ] && extra=(--top-logits 1)
				line=$(timeout 60 /tmp/new run --model $m.gguf --backend gpu --temp 0 --spec $spec --max-tokens 128 --format jsonl \
					"${extra[@]}" "Tell me a long story about the sea, and then another one." 2>/dev/null | tail -1)
				echo "$m spec=$spec round $r $mode: $(echo "$line" | grep -o '"generated_tokens":[0-9]*,"prefill_tps":[0-9.]*,"decode_tps":[0-9.]*')"
			done
		done
	done
	t "bonsai gpu $m"; timeout 90 /tmp/new gpu --model $m.gguf -p 16 -n 128 2>&1 | f | grep -E "^(plain|chained)"
done
t done
