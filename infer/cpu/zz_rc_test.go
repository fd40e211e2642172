package cpu
import ("testing";"bufio";"os";"fmt";"math";"github.com/bonsai-chat/bonsai/infer")
func TestZZRC(t *testing.T){
 r := infer.Rope{HeadDim:128, Dims:128, Base:1e6, FreqScale:1, AttnFactor:1, BetaFast:32, BetaSlow:1, OrigContext:4096}
 f,_ := os.Open("/tmp/dump/rc.txt"); sc := bufio.NewScanner(f); sc.Scan()
 ts := float32(math.Pow(float64(r.Base), float64(-2/float32(r.Dims)))); fmt.Printf("ts %08x\n", math.Float32bits(ts))
 cos, sin := make([]float32,64), make([]float32,64); nd:=0; last:=-1
 for sc.Scan(){ var p,i int; var a,b uint32; fmt.Sscanf(sc.Text(), "%d %d %x %x", &p,&i,&a,&b)
  if p!=last { r.Angles(p, cos, sin); last=p }
  if math.Float32bits(cos[i])!=a || math.Float32bits(sin[i])!=b { nd++; if nd<6 {fmt.Println("diff",p,i,cos[i],math.Float32frombits(a),sin[i],math.Float32frombits(b))} } }
 fmt.Println("differ", nd, "of", 4096*64)
}
