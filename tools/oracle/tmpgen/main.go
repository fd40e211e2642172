package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/bonsai-chat/bonsai/infer/synth"
)

func main() {
	typ, _ := synth.ParseType(os.Args[1])
	v, _ := strconv.Atoi(os.Args[2])
	layers, _ := strconv.Atoi(os.Args[4])
	seed, _ := strconv.Atoi(os.Args[5])
	s := synth.Shapes["tiny"]
	s.Vocab = v
	if layers > 0 {
		s.Layers = layers
	}
	if err := synth.Write(os.Args[3], synth.Options{Shape: s, Type: typ, Seed: uint64(seed)}); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
