// Renders every template in ../../testdata/templates with every context in
// contexts/ using @huggingface/jinja (the Jinja engine transformers.js and
// node-llama-cpp use, from the oracle's node_modules), and writes the
// results to golden/: TEMPLATE.CONTEXT.txt, or .err when it raises.
//
//   node infer/chat/jinja/testdata/golden.mjs   (from the repository root)
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../../../..");
const { Template } = await import(join(root, "tools/oracle/node_modules/@huggingface/jinja/dist/index.js"));

const templates = join(here, "../../testdata/templates");
const contexts = join(here, "contexts");
for (const t of readdirSync(templates).filter((f) => f.endsWith(".jinja")).sort()) {
  const tpl = new Template(readFileSync(join(templates, t), "utf8"));
  for (const c of readdirSync(contexts).filter((f) => f.endsWith(".json")).sort()) {
    const ctx = JSON.parse(readFileSync(join(contexts, c), "utf8"));
    const base = join(here, "golden", t.replace(/\.jinja$/, "") + "." + c.replace(/\.json$/, ""));
    try {
      writeFileSync(base + ".txt", tpl.render(ctx));
    } catch (e) {
      writeFileSync(base + ".err", String(e.message) + "\n");
    }
  }
}
