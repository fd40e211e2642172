#!/usr/bin/env bash
# llama3.sh shoots screenshots/llama3-chat.png: the chat on a synthetic
# Llama-3.2-1B-shaped model, which carries Llama 3.2's chat template (the
# info panel names the variant). Random weights: the text is noise, the
# prompt and stop tokens are the template's. Needs what shoot.sh needs.
#
# Usage: tools/screenshots/llama3.sh [MODEL.gguf]
#   MODEL defaults to $BONSAI_MODEL, else 'bonsai synth --arch llama
#   --shape 1b --type q4_0' (Llama 3's whole vocabulary: the variant is
#   recognised by its shape, vocabulary included).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/screenshots"
work=$(mktemp -d)
socket="bonsai-llama3-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$out"

if [[ -n "${BONSAI_BIN:-}" ]]; then
	cp "$BONSAI_BIN" "$work/bonsai"
else
	(cd "$root" && go build -o "$work/bonsai" ./cmd/bonsai)
fi
GOBIN="$work/bin" go install github.com/charmbracelet/freeze@v0.2.2
freeze="$work/bin/freeze"

model=${1:-${BONSAI_MODEL:-}}
if [[ -z "$model" ]]; then
	model="$work/synth-1b.gguf"
	"$work/bonsai" synth --arch llama --shape 1b --type q4_0 -o "$model" >/dev/null
fi

export XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config"
tmux_() { tmux -L "$socket" "$@"; }
. "$root/tools/screenshots/lib.sh"

tmux_ new-session -d -s llama -x 120 -y 32 \
	env TERM=xterm-256color COLORTERM=truecolor XDG_STATE_HOME="$work/state" \
	"$work/bonsai" --model "$model" --backend cpu --ctx 2048
wait_for llama "ready" 600
keys llama F2
ask llama "Hello! Which chat template are you prompted with?" 6
keys llama -l "/show"
keys llama Enter
sleep 1
shot llama llama3-chat
