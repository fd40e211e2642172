#!/bin/bash
S=$(date +%s)
for f in .gl/*.deb .carry/gpu/*.deb; do dpkg -x $f /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
gunzip -c .carry/gpu/bonsai.gz >/tmp/b; chmod +x /tmp/b; cd /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
f() { grep -v "XDG\|wgpu\]\|^error: XDG" ; }
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
t synth
timeout 170 /tmp/b synth --shape 8b --type q1_0 -o 8.gguf >/dev/null 2>&1 & timeout 170 /tmp/b synth --shape 1.7b --type q1_0 -o 17.gguf >/dev/null 2>&1 & wait
t bench 8b default
timeout 70 /tmp/b bench --model 8.gguf --backend gpu -r 3 2>&1 | f
t bench 1.7b default
timeout 50 /tmp/b bench --model 17.gguf --backend gpu -r 3 2>&1 | f
t bench 8b fuse all
BONSAI_GPU_FUSE=all timeout 35 /tmp/b bench --model 8.gguf --backend gpu -r 3 -p 0 2>&1 | f
t done
