package gpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// encodeTrits packs trits (most significant first) as ceil(256·N/243),
// with N over five positions (a 4-trit qh byte leaves the last one 0).
func encodeTrits(ts []uint8) byte {
	n := 0
	for i := 0; i < 5; i++ {
		n *= 3
		if i < len(ts) {
			n += int(ts[i])
		}
	}
	return byte((256*n + 242) / 243)
}

func TestTritCodec(t *testing.T) {
	for count := 4; count <= 5; count++ {
		combos := 1
		for i := 0; i < count; i++ {
			combos *= 3
		}
		for c := 0; c < combos; c++ {
			ts := make([]uint8, count)
			for i, v := count-1, c; i >= 0; i, v = i-1, v/3 {
				ts[i] = uint8(v % 3)
			}
			got := make([]uint8, count)
			tritsOf(encodeTrits(ts), count, func(n int, tr uint8) { got[n] = tr })
			if fmt.Sprint(got) != fmt.Sprint(ts) {
				t.Fatalf("trits %v decode as %v", ts, got)
			}
		}
	}
}

// ternaryRows draws rows of codes in {0,1,2} with one f16-exact scale per
// group of 128 and encodes them as PTQ1_0 and as PQ2_0 (the layout of the
// legacy group-128 Q2_0), returning both encodings and the weights.
func ternaryRows(r *rand.Rand, m, k int) (ptq, pq []byte, vals []float64) {
	blocks := k / 128
	ptq = make([]byte, m*blocks*28)
	pq = make([]byte, m*blocks*34)
	vals = make([]float64, m*k)
	for row := 0; row < m; row++ {
		for bl := 0; bl < blocks; bl++ {
			d := quant.F32ToF16(float32(0.01 + r.Float64()))
			codes := make([]uint8, 128)
			for j := range codes {
				codes[j] = uint8(r.IntN(3))
				vals[row*k+bl*128+j] = float64(int(codes[j])-1) * float64(quant.F16ToF32(d))
			}
			p := ptq[(row*blocks+bl)*28:]
			for m := 0; m < 16; m++ {
				p[m] = encodeTrits([]uint8{codes[m], codes[16+m], codes[32+m], codes[48+m], codes[64+m]})
			}
			for m := 0; m < 8; m++ {
				p[16+m] = encodeTrits([]uint8{codes[80+m], codes[88+m], codes[96+m], codes[104+m], codes[112+m]})
			}
			for h := 0; h < 2; h++ {
				p[24+h] = encodeTrits([]uint8{codes[120+h], codes[122+h], codes[124+h], codes[126+h]})
			}
			binary.LittleEndian.PutUint16(p[26:], d)
			q := pq[(row*blocks+bl)*34:]
			binary.LittleEndian.PutUint16(q, d)
			for j, c := range codes {
				q[2+j/4] |= c << (2 * (j % 4))
			}
		}
	}
	return ptq, pq, vals
}

// q8Rounded is x rounded to Q8_0 as llama.cpp quantizes activations.
func q8Rounded(t *testing.T, x []float32) []float64 {
	t.Helper()
	blob := make([]byte, len(x)/32*34)
	quant.QuantizeActivations(gguf.Q4_0, x, blob) // Q4_0 meets Q8_0 activations
	out := make([]float64, len(x))
	for b := 0; b < len(x)/32; b++ {
		d := float64(quant.F16ToF32(binary.LittleEndian.Uint16(blob[b*34:])))
		for j := 0; j < 32; j++ {
			out[b*32+j] = float64(int8(blob[b*34+2+j])) * d
		}
	}
	return out
}

// TestTwoBitMatMul runs PTQ1_0 and PQ2_0 matrices (and Q2_0's two
// layouts through the same kernel) against a float64 product of the
// weights the test encoded with Q8_0-rounded activations.
func TestTwoBitMatMul(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range []struct{ m, k, n int }{{48, 256, 1}, {40, 512, 3}, {64, 384, 70}} {
		ptq, pq, vals := ternaryRows(r, c.m, c.k)
		xv := randFloats(r, c.n*c.k, 1)
		xq := q8Rounded(t, xv)
		want := make([]float64, c.n*c.m)
		for i := 0; i < c.n; i++ {
			for row := 0; row < c.m; row++ {
				var s float64
				for j := 0; j < c.k; j++ {
					s += vals[row*c.k+j] * xq[i*c.k+j]
				}
				want[i*c.m+row] = s
			}
		}
		for _, enc := range []struct {
			typ  gguf.Type
			data []byte
		}{{gguf.PTQ1_0, ptq}, {gguf.PQ2_0, pq}, {gguf.Q2_0G128, pq}} {
			name := fmt.Sprintf("%s-%dx%d-n%d", enc.typ, c.m, c.k, c.n)
			w, err := b.LoadWeight(infer.WeightData{Name: name, Type: enc.typ, Shape: []int64{int64(c.k), int64(c.m)}, Data: enc.data})
			if err != nil {
				t.Fatal(err)
			}
			x, y := b.mustTensor(t, "x", c.n, c.k), b.mustTensor(t, "y", c.n, c.m)
			b.write(t, x, xv)
			got := b.run(t, c.n, 0, func() { b.MatMul(y, w, x) }, y)[0]
			checkClose(t, name, got, want, 1e-5)
			// the CPU-side embedding rows decode to the same weights
			row := make([]byte, c.k*4)
			if err := w.(*weight).embedRows([]int32{int32(c.m - 1)}, row); err != nil {
				t.Fatal(err)
			}
			emb := make([]float32, c.k)
			bytesToFloats(row, emb)
			checkClose(t, name+" embedding row", emb, vals[(c.m-1)*c.k:c.m*c.k], 0)
		}
	}
}
