package cpu

// TEMPORARY debugging aid (to be removed): compares every op of a pass with
// a dump of llama.cpp's graph tensors (/tmp/dump).

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

type rec struct {
	name string
	data []float32
	cols int
}

type dumpBackend struct {
	*Backend
	recs  []rec
	layer int
	count map[string]int
	on    bool
}

func (d *dumpBackend) save(name string, t infer.Tensor) {
	if !d.on {
		return
	}
	ct := t.(*tensor)
	n := d.active(ct) * ct.cols
	d.recs = append(d.recs, rec{name, append([]float32(nil), ct.data[:n]...), ct.cols})
}

func (d *dumpBackend) MatMul(dst infer.Tensor, w infer.Weight, x infer.Tensor) {
	d.Backend.MatMul(dst, w, x)
	d.save("mm:"+w.Name(), dst)
}
func (d *dumpBackend) RMSNorm(dst, x infer.Tensor, w infer.Weight, eps float32) {
	d.Backend.RMSNorm(dst, x, w, eps)
	d.save("norm:"+w.Name(), dst)
}
func (d *dumpBackend) Rope(x infer.Tensor, r infer.Rope) {
	d.Backend.Rope(x, r)
	d.save("rope:"+x.Name(), x)
}
func (d *dumpBackend) Attention(dst, q infer.Tensor, layer int, a infer.Attn) {
	d.Backend.Attention(dst, q, layer, a)
	d.save(fmt.Sprintf("attn:%d", layer), dst)
}
func (d *dumpBackend) SwiGLU(dst, g, u infer.Tensor) {
	d.Backend.SwiGLU(dst, g, u)
	d.save("swiglu", dst)
}
func (d *dumpBackend) Add(dst, a, b infer.Tensor) {
	d.Backend.Add(dst, a, b)
	d.save("add", dst)
}
func (d *dumpBackend) Embed(dst infer.Tensor, w infer.Weight) {
	d.Backend.Embed(dst, w)
	d.save("embed", dst)
}

var theDump *dumpBackend

func init() {
	infer.RegisterBackend("cpu-dump", func(o infer.BackendOptions) (infer.Backend, error) {
		b, err := New(o)
		theDump = &dumpBackend{Backend: b}
		return theDump, err
	})
}

func readDump(path string) (names []string, data [][]float32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		parts := strings.Fields(strings.TrimSpace(line))
		// T name... op ne0 ne1 ne2 ne3
		k := len(parts)
		n := int64(1)
		for _, s := range parts[k-4:] {
			v, _ := strconv.ParseInt(s, 10, 64)
			n *= v
		}
		buf := make([]byte, 4*n+1)
		if _, err := ioReadFull(r, buf); err != nil {
			return nil, nil, err
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(uint32(buf[4*i]) | uint32(buf[4*i+1])<<8 | uint32(buf[4*i+2])<<16 | uint32(buf[4*i+3])<<24)
		}
		names = append(names, strings.Join(parts[1:k-5], " ")+"|"+parts[k-5])
		data = append(data, v)
	}
	return names, data, nil
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestZZDump(t *testing.T) {
	model, dump := os.Getenv("DUMP_MODEL"), os.Getenv("DUMP_FILE")
	if model == "" {
		t.Skip()
	}
	var toks []int32
	for _, s := range strings.Split(os.Getenv("DUMP_TOKENS"), ",") {
		v, _ := strconv.Atoi(s)
		toks = append(toks, int32(v))
	}
	npre, _ := strconv.Atoi(os.Getenv("DUMP_NPRE"))
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := infer.Load(f, infer.Options{Backend: "cpu-dump", Context: 256, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pos := 0
	chunks := []int{npre}
	for i := npre; i < len(toks); i++ {
		chunks = append(chunks, 1)
	}
	for k, c := range chunks {
		theDump.on = k == len(chunks)-1
		if err := m.Forward(toks[pos:pos+c], pos); err != nil {
			t.Fatal(err)
		}
		pos += c
	}
	names, data, err := readDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	// Pair our records with llama.cpp's, in order, by kind.
	want := map[string][]string{}
	_ = want
	li := 0
	used := make([]bool, len(names))
	next := func(pred func(string) bool) int {
		for i := range names {
			if !used[i] && pred(names[i]) {
				used[i] = true
				return i
			}
		}
		return -1
	}
	_ = li
	for _, r := range theDump.recs {
		var pred func(string) bool
		has := func(s ...string) func(string) bool {
			return func(n string) bool {
				for _, x := range s {
					if !strings.Contains(n, x) {
						return false
					}
				}
				return true
			}
		}
		switch {
		case r.name == "embed":
			pred = has("embd|GET_ROWS")
		case strings.HasPrefix(r.name, "norm:") && strings.Contains(r.name, "attn_q_norm"):
			pred = has("Qcur_normed")
		case strings.HasPrefix(r.name, "norm:") && strings.Contains(r.name, "attn_k_norm"):
			pred = has("Kcur_normed")
		case strings.HasPrefix(r.name, "norm:") && strings.Contains(r.name, "attn_norm"):
			pred = has("attn_norm-")
		case strings.HasPrefix(r.name, "norm:") && strings.Contains(r.name, "ffn_norm"):
			pred = has("ffn_norm-")
		case strings.HasPrefix(r.name, "norm:output_norm"):
			pred = has("result_norm")
		case strings.Contains(r.name, "attn_q.weight"):
			pred = has("Qcur-", "MUL_MAT")
		case strings.Contains(r.name, "attn_k.weight"):
			pred = has("Kcur-", "MUL_MAT")
		case strings.Contains(r.name, "attn_v.weight"):
			pred = has("Vcur-", "MUL_MAT")
		case r.name == "rope:q":
			pred = has("Qcur-", "ROPE")
		case r.name == "rope:k":
			pred = has("Kcur-", "ROPE")
		case strings.HasPrefix(r.name, "attn:"):
			pred = has("kqv_out")
		case strings.Contains(r.name, "attn_output"):
			pred = has("node_", "MUL_MAT")
		case r.name == "add":
			pred = func(n string) bool { return strings.Contains(n, "ffn_inp") || strings.Contains(n, "l_out") }
		case strings.Contains(r.name, "ffn_gate"):
			pred = has("ffn_gate-")
		case strings.Contains(r.name, "ffn_up"):
			pred = has("ffn_up-")
		case r.name == "swiglu":
			pred = has("ffn_swiglu")
		case strings.Contains(r.name, "ffn_down"):
			pred = has("ffn_out-")
		case strings.Contains(r.name, "output.weight") || strings.Contains(r.name, "token_embd"):
			pred = has("result_output")
		default:
			t.Logf("%s: no match", r.name)
			continue
		}
		i := next(pred)
		if i < 0 {
			t.Logf("%s: not found", r.name)
			break
		}
		a, b := r.data, data[i]
		// compare the trailing rows they share
		n := min(len(a), len(b))
		a, b = a[len(a)-n:], b[len(b)-n:]
		ndiff, worst, at := 0, 0.0, 0
		for j := range a {
			if a[j] != b[j] {
				ndiff++
				if d := math.Abs(float64(a[j] - b[j])); d > worst {
					worst, at = d, j
				}
			}
		}
		t.Logf("%-28s %-28s n=%6d differ=%5d worst=%.3g at %d (row %d col %d) ours %.9g theirs %.9g", r.name, names[i], n, ndiff, worst, at, at/r.cols, at%r.cols, a[at], b[at])
	}
}
