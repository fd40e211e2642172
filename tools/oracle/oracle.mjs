#!/usr/bin/env node
// oracle.mjs asks llama.cpp (the prebuilt CPU build that node-llama-cpp ships)
// what it makes of a GGUF model: how it tokenizes a prompt, which tokens greedy
// decoding produces, and the logits behind each choice. bonsai's parity tests
// compare their own answers with this JSON.
//
// usage:
//   node oracle.mjs --model FILE (--prompt TEXT | --tokens 1,2,3) [--n 24]
//                   [--top 32] [--special] [--full-logits OUT.f32] [--threads 2]
//                   [--batch 512] [--cache-type-k f16|q8_0] [--cache-type-v f16|q8_0]
//                   [--flash-attention]
//   (a q8_0 cache turns flash attention on, as llama.cpp requires for a
//   quantized V; with f16 it is off unless --flash-attention)
//   node oracle.mjs --model FILE --tokenize PROMPTS.json [--special]
//
// Generation output (one JSON object on stdout):
//   prompt_tokens   the prompt as llama.cpp tokenizes it (or the ids given)
//   tokens          the greedy continuation, n ids
//   steps[i]        logits for the i-th generated token, computed after the
//                   prompt and the first i generated tokens: {top: [[id, logit]...]}
//                   with the `top` largest logits, highest first
// --full-logits writes every step's full logit vector as little-endian float32,
// n rows of n_vocab, for a tighter comparison than the top entries allow.
//
// Tokenize output: {"results": [{"text": s, "tokens": [...]}, ...]}.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
import {readFileSync, writeFileSync} from "node:fs";
import {parseArgs} from "node:util";

const {values: args} = parseArgs({
    options: {
        model: {type: "string"},
        prompt: {type: "string"},
        tokens: {type: "string"},
        tokenize: {type: "string"},
        n: {type: "string", default: "24"},
        top: {type: "string", default: "32"},
        special: {type: "boolean", default: false},
        "full-logits": {type: "string"},
        threads: {type: "string", default: "2"},
        batch: {type: "string", default: "512"},
        "cache-type-k": {type: "string", default: "f16"},
        "cache-type-v": {type: "string", default: "f16"},
        "flash-attention": {type: "boolean", default: false},
    },
    strict: true,
});

function fail(msg) {
    process.stderr.write(`oracle: ${msg}\n`);
    process.exit(2);
}

function positiveInt(name, text) {
    const v = Number(text);
    if (!Number.isInteger(v) || v < 0) fail(`--${name} must be a non-negative integer, got ${JSON.stringify(text)}`);
    return v;
}

if (!args.model) fail("--model is required");
const modes = [args.prompt !== undefined, args.tokens !== undefined, args.tokenize !== undefined].filter(Boolean).length;
if (modes !== 1) fail("give exactly one of --prompt, --tokens, --tokenize");

// build:"never" keeps this offline: the prebuilt binary from the npm package or nothing.
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});

if (args.tokenize !== undefined) {
    const prompts = JSON.parse(readFileSync(args.tokenize, "utf8"));
    if (!Array.isArray(prompts) || prompts.some((p) => typeof p !== "string")) fail("--tokenize needs a JSON array of strings");
    const model = await llama.loadModel({modelPath: args.model, vocabOnly: true});
    const results = prompts.map((text) => ({text, tokens: Array.from(model.tokenize(text, args.special))}));
    process.stdout.write(JSON.stringify({results}) + "\n");
    await model.dispose();
    await llama.dispose();
    process.exit(0);
}

const n = positiveInt("n", args.n);
const top = positiveInt("top", args.top);
const threads = positiveInt("threads", args.threads);
const batchSize = positiveInt("batch", args.batch);
const cacheTypes = {f16: "F16", q8_0: "Q8_0"};
for (const name of ["cache-type-k", "cache-type-v"]) {
    if (!(args[name] in cacheTypes)) fail(`--${name} must be one of ${Object.keys(cacheTypes).join(", ")}, got ${JSON.stringify(args[name])}`);
}
const quantizedCache = args["cache-type-k"] !== "f16" || args["cache-type-v"] !== "f16";

const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
let promptTokens;
if (args.prompt !== undefined) {
    promptTokens = Array.from(model.tokenize(args.prompt, args.special));
} else {
    promptTokens = args.tokens.split(",").filter((s) => s.trim() !== "").map((s) => positiveInt("tokens", s.trim()));
}
if (promptTokens.length === 0) fail("the prompt has no tokens");

// Flash attention off and an f16 KV cache: llama.cpp's defaults for a CPU
// context. A quantized cache needs flash attention (llama.cpp refuses a
// quantized V without it), so it turns it on for K and V alike.
const context = await model.createContext({
    contextSize: promptTokens.length + n + 16,
    batchSize,
    threads,
    flashAttention: quantizedCache || args["flash-attention"],
    experimentalKvCacheKeyType: cacheTypes[args["cache-type-k"]],
    experimentalKvCacheValueType: cacheTypes[args["cache-type-v"]],
    sequences: 1,
});
const sequence = context.getSequence();

const wantFull = args["full-logits"] !== undefined;
const fullRows = [];
const steps = [];
const generated = [];

// Each step feeds what the model has not seen yet and asks for the greedy next
// token plus its logits; the prompt goes in as one batch, as in a real chat.
// Full logit vectors are costly to marshal from C++ (a Map of n_vocab entries
// per step), so without --full-logits llama.cpp returns only the top entries.
const logitsOption = wantFull ? true : {filter: {tokens: [], includeTop: Math.max(top, 2)}};
let pending = promptTokens;
let nVocab = 0;
for (let i = 0; i < n; i++) {
    const input = pending.map((t, j) =>
        j < pending.length - 1
            ? t
            : [t, {generateNext: {token: true, logits: logitsOption, options: {temperature: 0}}}]);
    const out = await sequence.controlledEvaluate(input);
    const next = out[out.length - 1]?.next;
    if (next === undefined || next.token == null || next.logits === undefined) fail(`step ${i}: llama.cpp returned no token or logits`);

    const sorted = Array.from(next.logits.entries()); // already highest first
    const [bestId] = sorted[0];
    if (wantFull) nVocab = sorted.length;
    // Greedy must be the argmax; a mismatch means the sampler did something we did not ask for.
    if (next.logits.get(next.token) !== next.logits.get(bestId)) fail(`step ${i}: sampled ${next.token} is not the argmax ${bestId}`);
    steps.push({top: sorted.slice(0, top).map(([id, v]) => [id, v])});
    if (wantFull) {
        const row = new Float32Array(sorted.length);
        for (const [id, v] of sorted) row[id] = v;
        fullRows.push(row);
    }
    generated.push(next.token);
    pending = [next.token];
}

if (wantFull) {
    const bytes = Buffer.concat(fullRows.map((r) => Buffer.from(r.buffer, r.byteOffset, r.byteLength)));
    writeFileSync(args["full-logits"], bytes);
}

process.stdout.write(JSON.stringify({
    model: args.model,
    n_vocab: wantFull ? nVocab : undefined,
    prompt_tokens: promptTokens,
    tokens: generated,
    steps,
}) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
