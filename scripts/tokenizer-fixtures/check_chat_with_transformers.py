"""Cross-check the committed chat fixtures against transformers itself.

The fixtures in pkg/chat/testdata were rendered with jinja2 set up the way
transformers' apply_chat_template sets it up. This script renders every
fixture conversation with transformers' own apply_chat_template (tokenize=False)
and reports any difference.

usage: python check_chat_with_transformers.py QWEN3_TOKENIZER_DIR pkg/chat/testdata/qwen3_chat.jsonl
  QWEN3_TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json
  (e.g. zcat pkg/tokenizer/testdata/qwen3/tokenizer.json.gz > DIR/tokenizer.json
   and cp pkg/tokenizer/testdata/qwen3/tokenizer_config.json DIR/)
"""
import json
import sys

from transformers import PreTrainedTokenizerFast


def main():
    tok_dir, fixtures = sys.argv[1], sys.argv[2]
    tok = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    bad = 0
    n = 0
    with open(fixtures, encoding="utf-8") as f:
        for line in f:
            fx = json.loads(line)
            kwargs = {"tokenize": False, "add_generation_prompt": fx["add_generation_prompt"]}
            if fx.get("tools") is not None:
                kwargs["tools"] = fx["tools"]
            if fx.get("enable_thinking") is not None:
                kwargs["enable_thinking"] = fx["enable_thinking"]
            got = tok.apply_chat_template(fx["messages"], **kwargs)
            n += 1
            if got != fx["text"]:
                bad += 1
                print(f"MISMATCH {fx['name']!r}:\n  transformers: {got!r}\n  fixture:      {fx['text']!r}")
    import transformers
    print(f"{n - bad}/{n} fixtures identical to transformers {transformers.__version__} apply_chat_template")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
