package infer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// ErrNonFinite: the model computes NaN or infinite logits (NaN or Inf in its
// weights or norms, or a NaN rms epsilon); everything it generated would be
// garbage.
var ErrNonFinite = errors.New("the model computes non-finite logits")

// ErrTooLarge: a requested size (context, threads) is beyond what the model
// supports or what the machine can hold. The message says how much it would
// need.
var ErrTooLarge = errors.New("too large")

// MaxThreads is the most CPU threads Load accepts on a machine of numCPU
// logical CPUs: oversubscribing a little can help a busy machine, but every
// thread holds per-thread scratch, and a typo of many digits must not become
// an out-of-memory crash.
func MaxThreads(numCPU int) int { return max(64, 4*numCPU) }

// hostMemory reports the memory this process may still allocate, in bytes,
// and false when it cannot tell. Tests replace it.
var hostMemory = availableMemory

// checkFile refuses what would fail later with a misleading message or a
// crash: the sizes (checkSizes) and norm weights of a type the backends do
// not take.
func checkFile(f *gguf.File, hp Hyperparams, ctx, threads int) error {
	if err := checkSizes(hp, ctx, threads); err != nil {
		return err
	}
	return checkNorms(f)
}

// checkNorms refuses norm weights that are not f32. Every converter writes
// them in f32 and both backends read them only so; another type would
// otherwise surface mid-pass as a bad tensor shape.
func checkNorms(f *gguf.File) error {
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if strings.HasSuffix(t.Name, "norm.weight") && t.Type != gguf.F32 {
			return fmt.Errorf("%w: norm %s is %s; norm weights must be f32", ErrUnsupportedType, t.Name, t.Type)
		}
	}
	return nil
}

// MaxContext is the largest context Load accepts at all: positions are
// int32 on every backend, and far below that a cache would not fit any
// machine; the memory checks refuse what does not fit this one.
const MaxContext = 1 << 24

// checkSizes refuses a context or thread count that cannot work before
// anything is allocated: a context beyond MaxContext (it would only fail
// later as an allocation the runtime cannot recover from) or more threads
// than MaxThreads. A context beyond the model's training is the user's
// choice: Load allows it and says so (Model.Notes).
func checkSizes(hp Hyperparams, ctx, threads int) error {
	if ctx > MaxContext {
		return fmt.Errorf("%w: a context of %d tokens (its KV cache alone would need %s): bonsai takes at most %d, and the model was trained on %d",
			ErrTooLarge, ctx, FormatBytes(KVBytes(hp, ctx)), MaxContext, hp.ContextTrain)
	}
	if n := runtime.NumCPU(); threads > MaxThreads(n) {
		return fmt.Errorf("%w: %d CPU threads: this machine has %d CPUs and bonsai runs at most %d", ErrTooLarge, threads, n, MaxThreads(n))
	}
	return nil
}

// contextNote is what Load says about a context beyond the model's
// training, or "" for one within it.
func contextNote(hp Hyperparams, ctx int) string {
	if ctx <= hp.ContextTrain {
		return ""
	}
	return fmt.Sprintf("a context of %d tokens is beyond the %d this model was trained on: "+
		"past %d tokens its replies may degrade", ctx, hp.ContextTrain, hp.ContextTrain)
}

// checkLogits refuses the trial pass's logits when any is NaN or infinite:
// a model that computes them produces garbage ("!!!!" until the context
// fills) rather than an error, so it must not load.
func checkLogits(logits []float32, hp Hyperparams) error {
	nan, inf := 0, 0
	for _, v := range logits {
		switch {
		case v != v:
			nan++
		case math.IsInf(float64(v), 0):
			inf++
		}
	}
	if nan == 0 && inf == 0 {
		return nil
	}
	why := "NaN or Inf in its weights or norms"
	if e := float64(hp.RMSEps); math.IsNaN(e) || math.IsInf(e, 0) {
		why = fmt.Sprintf("its rms epsilon is %g", e)
	}
	return fmt.Errorf("%w: the trial pass gave %d NaN and %d infinite logits of %d (%s); the file is damaged",
		ErrNonFinite, nan, inf, len(logits), why)
}

// KVBytes is the f16 KV cache of ctx positions over every layer, as a
// float64 so that an absurd ctx reports a size instead of overflowing. It
// bounds a quantized cache too (Q8_0 takes 17/32 of it).
func KVBytes(hp Hyperparams, ctx int) float64 {
	return float64(KVBytesPerToken(hp, KVTypes{})) * float64(ctx)
}

// HostBytes estimates what the CPU backend allocates beyond the mapped
// file for a context of ctx tokens, batches of batch tokens and threads
// workers: the KV cache, the activations of one batch (hidden, attention
// and feed-forward rows, logits) and each worker's attention scores.
func HostBytes(hp Hyperparams, ctx, batch, threads int) float64 {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	const f32 = 4
	rows := float64(batch) * f32 * float64(4*hp.Embed+2*hp.Heads*hp.HeadDim+3*hp.FFN)
	logits := float64(hp.Vocab) * f32 * 2
	scores := float64(threads) * f32 * float64(ctx+hp.HeadDim)
	return KVBytes(hp, ctx) + rows + logits + scores
}

// checkHostMemory refuses a CPU load whose allocations would not fit the
// memory the machine has left: Go cannot recover from running out, so the
// process would die mid-load (in the chat, with the terminal still raw).
func checkHostMemory(hp Hyperparams, ctx, batch, threads int) error {
	avail, ok := hostMemory()
	if !ok {
		return nil
	}
	need := HostBytes(hp, ctx, batch, threads)
	if need <= float64(avail) {
		return nil
	}
	advice := "the model does not fit even with a small context"
	// Everything but the KV cache and the scores grows with the batch, not
	// the context: what is left over them sets the largest context.
	perToken := HostBytes(hp, ctx+1, batch, threads) - need
	if fit := int((float64(avail) - (need - perToken*float64(ctx))) / perToken); fit >= 16 {
		advice = fmt.Sprintf("a context of at most %d tokens fits", fit)
	}
	return fmt.Errorf("%w: a context of %d tokens needs %s of memory on the CPU (%s of it the KV cache) and %s is available; %s",
		ErrTooLarge, ctx, FormatBytes(need), FormatBytes(KVBytes(hp, ctx)), FormatBytes(float64(avail)), advice)
}

// availableMemory is the smaller of the kernel's MemAvailable and what the
// process's cgroup (v2) still allows.
func availableMemory() (int64, bool) {
	avail, ok := memInfoAvailable()
	if limit, used, cok := cgroupMemory(); cok && limit > used {
		if !ok || limit-used < avail {
			avail, ok = limit-used, true
		}
	}
	return avail, ok
}

func memInfoAvailable() (int64, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parseMemAvailable(data)
}

// parseMemAvailable reads "MemAvailable:  123456 kB" from /proc/meminfo.
func parseMemAvailable(data []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
				return 0, false
			}
			return kb * 1024, true
		}
	}
	return 0, false
}

func cgroupMemory() (limit, used int64, ok bool) {
	read := func(name string) (int64, bool) {
		data, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return v, err == nil // "max" (no limit) does not parse
	}
	limit, ok = read("memory.max")
	if !ok {
		return 0, 0, false
	}
	used, ok = read("memory.current")
	return limit, used, ok
}

// FormatBytes writes n bytes with a binary unit ("12.0 MiB"); sizes too large
// for any unit stay in the largest.
func FormatBytes(n float64) string {
	if math.IsNaN(n) || n < 0 {
		return fmt.Sprintf("%g B", n)
	}
	if n < 1024 {
		return fmt.Sprintf("%.0f B", n)
	}
	const units = "KMGTPEZY"
	i := -1
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", n, units[i])
}
