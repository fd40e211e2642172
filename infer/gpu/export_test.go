package gpu

// The tests of package gpu_test run models through infer.Load, which
// opens the backend; these turn it to the references they compare the
// default against.

// AttnPaths are the decode attention paths: "lat" (the default: attn_lat
// while the sequence fits it, then the split passes) and "split" (the
// split passes alone).
var AttnPaths = []string{"lat", "split"}

// UseAttnPath turns b to a decode attention path of AttnPaths.
func UseAttnPath(b *Backend, path string) {
	if path == "split" {
		b.latMax = 0
	}
}

// Unfuse turns b to encoding every op as its own dispatch.
func Unfuse(b *Backend) { b.noFuse = true }

// Unround keeps b's producers from rounding their rows for q1_xq: every
// decode matvec quantizes x in its own workgroups, as the unfused passes do.
func Unround(b *Backend) { b.noRounded = true }

// ForceMatVec makes b try the decode matvec kernel name first.
func ForceMatVec(b *Backend, name string) { b.forceMatVec = name }

// RunByRun turns b to running the rows of several sequences run by run
// (infer.RowPasses), the passes TestForwardRowsMatchesForward holds to
// the bits of each sequence alone, instead of in one pass (OnePass).
func RunByRun(b *Backend) { b.runByRun = true }

// OnePasses lets b run the rows of several sequences as one pass (OnePass),
// which production leaves to a Q8_0 cache.
func OnePasses(b *Backend) { b.onePass = true }

// TraceCreated makes b's Created collect the labels of what its device
// makes from now on.
func TraceCreated(b *Backend) { b.d.created.Labels = []string{} }
