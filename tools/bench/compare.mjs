#!/usr/bin/env node
// compare.mjs benchmarks llama.cpp (the prebuilt CPU build that
// node-llama-cpp ships, installed under tools/oracle) and bonsai on the same
// GGUF file, llama-bench style, and prints both speeds and their ratio.
//
// usage (from the repository root):
//   go build -o bonsai ./cmd/bonsai
//   node tools/bench/compare.mjs --model FILE [--bonsai ./bonsai] [-p 512] [-n 128] [-r 5] [--threads 2] [--rounds 1]
//                                [--peer-model FILE] [--oracle DIR] [--cpu-features all|avx2|portable] [--membw]
//
// --peer-model gives llama.cpp another file of the same shape, for a type it
// lacks: the Prism types (PQ2_0, PTQ1_0) are measured against its Q2_0.
//
// --oracle gives another node_modules folder for node-llama-cpp (e.g. a copy
// whose bins keep only libggml-cpu-haswell.so: llama.cpp's AVX2 build without
// AVX-512, beside bonsai --cpu-features avx2; tools/bench/cpu.sh makes one).
// --cpu-features and --membw are passed to bonsai bench; with --membw the
// table gets bonsai's tg as a share of the read bandwidth.
//
// On a shared machine the load changes from minute to minute; --rounds K
// alternates the two programs K times (r repetitions each time), so both
// see the same conditions, and reports the ratio of each round too.
//
// Both sides run the same tests: pp = the prompt as one batch of p random
// tokens from an empty cache; tg = n tokens decoded one at a time from an
// empty cache, without sampling. llama.cpp is driven through node-llama-cpp's
// evaluateWithoutGeneratingNewTokens, which adds a little JavaScript overhead
// per call (well under a millisecond), so its tg figure is a slight
// underestimate of llama-bench's.
import {spawnSync} from "node:child_process";
import {loadavg, cpus} from "node:os";
import {dirname, resolve} from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";
import {parseArgs} from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const {values: args} = parseArgs({
    options: {
        model: {type: "string"},
        bonsai: {type: "string", default: "./bonsai"},
        p: {type: "string", short: "p", default: "512"},
        n: {type: "string", short: "n", default: "128"},
        r: {type: "string", short: "r", default: "5"},
        threads: {type: "string", default: "2"},
        rounds: {type: "string", default: "1"},
        "skip-llama": {type: "boolean", default: false},
        "peer-model": {type: "string"},
        oracle: {type: "string"},
        "cpu-features": {type: "string", default: "all"},
        membw: {type: "boolean", default: false},
    },
    strict: true,
});

function fail(msg) {
    process.stderr.write(`compare: ${msg}\n`);
    process.exit(2);
}
function count(name, min) {
    const v = Number(args[name]);
    if (!Number.isInteger(v) || v < min) fail(`-${name.length > 1 ? "-" : ""}${name} must be an integer ≥ ${min}, got ${JSON.stringify(args[name])}`);
    return v;
}
if (!args.model) fail("--model is required");
const p = count("p", 0), n = count("n", 0), reps = count("r", 1), threads = count("threads", 1), rounds = count("rounds", 1);
if (p === 0 && n === 0) fail("nothing to measure with -p 0 and -n 0");

function stats(samples) {
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    const sd = samples.length < 2 ? 0 : Math.sqrt(samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (samples.length - 1));
    return {mean, sd};
}

// Random token ids from a fixed seed (speed does not depend on them).
function tokenIds(count, vocab) {
    let s = 0x2545f491;
    const ids = [];
    for (let i = 0; i < count; i++) {
        s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
        ids.push((s >>> 0) % vocab);
    }
    return ids;
}

async function openLlama() {
    const {getLlama, LlamaLogLevel} = await import(pathToFileURL(resolve(args.oracle ?? resolve(here, "../oracle/node_modules"), "node-llama-cpp/dist/index.js")).href);
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath: args["peer-model"] ?? args.model, gpuLayers: 0});
    const context = await model.createContext({
        contextSize: Math.max(p, n, 1) + 8, batchSize: Math.max(p, 1), threads, flashAttention: false, sequences: 1,
    });
    const seq = context.getSequence();
    const ids = tokenIds(Math.max(p, n), model.tokens.length ?? 151936);
    await seq.evaluateWithoutGeneratingNewTokens([ids[0]]); // warm-up
    return {llama, model, context, seq, ids};
}

async function benchLlama({seq, ids}) {
    const results = [];
    if (p > 0) {
        const samples = [];
        for (let r = 0; r < reps; r++) {
            await seq.clearHistory();
            const t0 = process.hrtime.bigint();
            await seq.evaluateWithoutGeneratingNewTokens(ids.slice(0, p));
            samples.push(p / (Number(process.hrtime.bigint() - t0) / 1e9));
        }
        results.push({test: `pp${p}`, samples});
    }
    if (n > 0) {
        const samples = [];
        for (let r = 0; r < reps; r++) {
            await seq.clearHistory();
            const t0 = process.hrtime.bigint();
            for (let i = 0; i < n; i++) await seq.evaluateWithoutGeneratingNewTokens([ids[i]]);
            samples.push(n / (Number(process.hrtime.bigint() - t0) / 1e9));
        }
        results.push({test: `tg${n}`, samples});
    }
    return results;
}

function benchBonsai() {
    const out = spawnSync(args.bonsai, ["bench", "--model", args.model, "--backend", "cpu", "--threads", String(threads),
        "-p", String(p), "-n", String(n), "-r", String(reps), "--format", "json", "--cpu-features", args["cpu-features"],
        ...(args.membw ? ["--membw"] : [])], {encoding: "utf8", maxBuffer: 1 << 24});
    if (out.error) fail(`running ${args.bonsai}: ${out.error.message} (build it: go build -o bonsai ./cmd/bonsai)`);
    if (out.status !== 0) fail(`bonsai bench failed (${out.status}):\n${out.stderr}`);
    return JSON.parse(out.stdout).map((r) => ({test: r.test, samples: r.samples_tps, pct: r.pct_read_bw, bw: r.read_bw_bytes_per_s}));
}

const loadBefore = loadavg()[0];
const lm = args["skip-llama"] ? null : await openLlama();
const all = {llama: {}, bonsai: {}};
const perRound = [];
const pcts = {};
for (let round = 0; round < rounds; round++) {
    const l = lm ? await benchLlama(lm) : [];
    const b = benchBonsai();
    const ratios = {};
    for (const r of b) {
        (all.bonsai[r.test] ??= []).push(...r.samples);
        if (r.pct) (pcts[r.test] ??= []).push(`${r.pct.toFixed(0)}% of ${(r.bw / 1e9).toFixed(1)} GB/s`);
        const lr = l.find((x) => x.test === r.test);
        if (lr) {
            (all.llama[r.test] ??= []).push(...lr.samples);
            ratios[r.test] = stats(r.samples).mean / stats(lr.samples).mean;
        }
    }
    perRound.push(ratios);
}
if (lm) {
    await lm.context.dispose();
    await lm.model.dispose();
    await lm.llama.dispose();
}
const loadAfter = loadavg()[0];

const fmt = (s) => s ? `${s.mean.toFixed(2)} ± ${s.sd.toFixed(2)}` : "—";
console.log(`model: ${args.model}${args["peer-model"] ? ` (llama.cpp on ${args["peer-model"]})` : ""}`);
console.log(`threads: ${threads}, ${rounds} round(s) × ${reps} repetitions, CPU: ${cpus()[0]?.model} ×${cpus().length}, load average ${loadBefore.toFixed(2)} → ${loadAfter.toFixed(2)}`);
console.log("");
console.log("| test | llama.cpp t/s | bonsai t/s | bonsai / llama.cpp | per round | bonsai's share of read bandwidth per round |");
console.log("| --- | ---: | ---: | ---: | --- | --- |");
for (const test of Object.keys(all.bonsai)) {
    const ls = all.llama[test] ? stats(all.llama[test]) : null, bs = stats(all.bonsai[test]);
    const rr = perRound.map((r) => r[test] ? r[test].toFixed(2) + "×" : "—").join(" ");
    console.log(`| ${test} | ${fmt(ls)} | ${fmt(bs)} | ${ls ? (bs.mean / ls.mean).toFixed(2) + "×" : "—"} | ${rr} | ${(pcts[test] ?? ["—"]).join(", ")} |`);
}
