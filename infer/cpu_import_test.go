package infer_test

import _ "github.com/bonsai-chat/bonsai/infer/cpu" // the tests load models on the CPU
