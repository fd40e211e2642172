// Command export turns train.py's model.bin into bonsai's default model file:
// a qwen3 GGUF whose 2-D weights are Q1_0 (requantized with bonsai's own
// reference quantizer, which must reproduce train.py's bytes exactly), with
// the full Qwen3 tokenizer and the built-in chat template.
//
//	go run ./tools/train-default/export -in model.bin -out infer/defaultmodel/bonsai-tiny.gguf
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "model.bin", "train.py's output")
	out := flag.String("out", "infer/defaultmodel/bonsai-tiny.gguf", "GGUF file to write")
	flag.Parse()
	if err := exportFile(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "export:", err)
		os.Exit(1)
	}
}

func exportFile(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	m, err := parseModelBin(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	w, err := buildGGUF(m)
	if err != nil {
		return err
	}
	if err := w.WriteFile(out); err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d tensors, %d bytes\n", out, len(m.Tensors), st.Size())
	return nil
}
