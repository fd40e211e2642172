// Asks llama.cpp (through tools/oracle's node-llama-cpp) how a vocabulary
// tokenizes and detokenizes texts; TestLlamaCppGoldens runs it under -update.
//
//   node llamacpp.mjs VOCAB.gguf REQUEST.json
//
// REQUEST.json is {"texts": [...]}. Prints {"plain", "special", "detok_plain",
// "detok_special"}: each text's ids without and with special-token parsing
// (llama.cpp's parse_special; no BOS), and llama_detokenize of those ids with
// special tokens rendered.
import {readFileSync} from "node:fs";
import {fileURLToPath} from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const {getLlama} = await import(path.join(here, "../../../tools/oracle/node_modules/node-llama-cpp/dist/index.js"));

const [vocab, request] = process.argv.slice(2);
const {texts} = JSON.parse(readFileSync(request, "utf8"));
const llama = await getLlama({gpu: false, logLevel: "error"});
const model = await llama.loadModel({modelPath: vocab, vocabOnly: true});
const out = {plain: [], special: [], detok_plain: [], detok_special: []};
for (const text of texts) {
    const plain = Array.from(model.tokenize(text, false));
    const special = Array.from(model.tokenize(text, true));
    out.plain.push(plain);
    out.special.push(special);
    out.detok_plain.push(model.detokenize(plain, true));
    out.detok_special.push(model.detokenize(special, true));
}
console.log(JSON.stringify(out));
