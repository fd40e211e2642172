// Element-wise activations of the hybrid layers, llama.cpp's f32 formulas:
// UNARY dst = f(x); GATE dst = x ⊙ f(g); DECAY dst = softplus(x + bias)·a
// with bias and a broadcast over rows (qwen35's DeltaNet decay); BIAS
// dst = x + bias, bias broadcast over rows (a projection's bias); SCALE
// dst = x·S. f is one of SIGMOID, SILU, SOFTPLUS, GELU (ggml's: x rounded to
// f16, the tanh GELU rounded to f16, 0 below −10 and x above 10). Aliasing: ALIAS_X binds dst as x, ALIAS_G
// binds dst as g (one read_write binding each time).
// Constants: COLS, XROWS, S (SCALE); flags UNARY, GATE, DECAY, BIAS, SCALE, SIGMOID, SILU, GELU,
// SOFTPLUS, ALIAS_X, ALIAS_G.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
//#if ALIAS_X
fn getx(i: u32) -> f32 { return dst[i]; }
//#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn getx(i: u32) -> f32 { return x[i]; }
//#endif
//#if GATE
//#if ALIAS_G
fn getg(i: u32) -> f32 { return dst[i]; }
//#else
@group(0) @binding(2) var<storage, read> g: array<f32>;
fn getg(i: u32) -> f32 { return g[i]; }
//#endif
//#endif
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
//#if DECAY
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> a: array<f32>;
//#endif
//#if BIAS
@group(0) @binding(4) var<storage, read> bias: array<f32>;
//#endif

fn softplus(v: f32) -> f32 {
	if (v > 20.0) {
		return v;
	}
	return log(1.0 + exp(v));
}

fn f16round(v: f32) -> f32 {
	return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

//#if DECAY
//#else
//#if BIAS
//#else
//#if SCALE
//#else
fn act(v: f32) -> f32 {
//#if SIGMOID
	return 1.0 / (1.0 + exp(-v));
//#endif
//#if SILU
	return v / (1.0 + exp(-v));
//#endif
//#if SOFTPLUS
	return softplus(v);
//#endif
//#if GELU
	if (v <= -10.0) {
		return 0.0;
	}
	if (v >= 10.0) {
		return v;
	}
	let h = f16round(v);
	return f16round(0.5 * h * (1.0 + tanh(0.79788456080286535587989211986876 * h * (1.0 + 0.044715 * h * h))));
//#endif
}
//#endif
//#endif
//#endif

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let j = gid.x;
	let row = gid.y;
	if (j >= COLS || row >= min(batch.n, XROWS)) {
		return;
	}
	let i = row * COLS + j;
//#if UNARY
	dst[i] = act(getx(i));
//#endif
//#if GATE
	dst[i] = getx(i) * act(getg(i));
//#endif
//#if DECAY
	dst[i] = softplus(getx(i) + bias[j]) * a[j];
//#endif
//#if BIAS
	dst[i] = getx(i) + bias[j];
//#endif
//#if SCALE
	dst[i] = getx(i) * S;
//#endif
}
