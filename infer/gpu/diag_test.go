package gpu_test

import (
	"math"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

func TestDiagDepth(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_K, gguf.F16} {
		for _, layers := range []int{4, 3} {
			t.Run("", func(t *testing.T) {
				cfg := tinymodel.Small(typ)
				cfg.Layers = layers
				c := loadOn(t, "cpu", cfg)
				g := loadOn(t, "gpu", cfg)
				prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
				c.Forward(prompt, 0)
				g.Forward(prompt, 0)
				var md, ma float64
				for i, w := range c.Logits() {
					md = math.Max(md, math.Abs(float64(g.Logits()[i]-w)))
					ma = math.Max(ma, math.Abs(float64(w)))
				}
				t.Logf("%s layers %d: diff %.4g max %.4g gpu %v cpu %v", typ, layers, md, ma, g.Logits()[:3], c.Logits()[:3])
			})
		}
	}
}
