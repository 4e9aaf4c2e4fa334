#!/usr/bin/env python3
"""Generate tokenizer fixtures for pkg/tokenizer with Hugging Face `tokenizers`.

usage: python3 gen_tokenizer_fixtures.py QWEN3_DIR OUT_DIR

QWEN3_DIR holds tokenizer.json and tokenizer_config.json written by
dump_qwen3.mjs. OUT_DIR is pkg/tokenizer/testdata. The script writes:

  small_a.json            BPE trained here: NFC (Sequence) + Split(Qwen3.5 regex)
                          + ByteLevel(use_regex=false), vocab 1000
  small_c.json            small_a plus added tokens with lstrip / rstrip /
                          normalized / single_word flags
  small_b.json            BPE trained here: ByteLevel(use_regex=true,
                          add_prefix_space=true), merges stored as "a b" strings
  qwen3/tokenizer.json.gz the Qwen3 tokenizer.json, gzip-compressed
  qwen3/tokenizer_config.json, qwen3/generation_config.json
  *.jsonl                 fixtures, one JSON object per line:
      {"text", "ids", "ids_nospecial", "decoded", "decoded_skip"}
    ids            encode(text, add_special_tokens=False)
    ids_nospecial  same with encode_special_tokens=True (special added tokens
                   are not matched; non-special added tokens still are)
    decoded        decode(ids, skip_special_tokens=False)
    decoded_skip   decode(ids, skip_special_tokens=True)
  *_decode.jsonl  {"ids", "decoded", "decoded_skip"} for id sequences that
                  split UTF-8 characters (byte tokens, truncated sequences).
"""

import gzip
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = [
    "Hello world",
    "Hello world's 12345  café\n\n  x",
    "I'm sure you'll see they've done it, haven't they? He'd say WE'RE DONE. It'S OK'LL'D",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing spaces   ",
    "tabs\tin\t\tthe\t middle\t",
    "windows\r\nline\r\nendings\r\n\r\n",
    "mixed \n\n\n newlines \r \r\r\n end\n",
    "numbers 0 1 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; } // dot\n",
    'func main() {\n\tfmt.Println("héllo, 世界")\n}\n',
    "SELECT id, name FROM users WHERE age >= 21 AND name LIKE '%ann%';",
    "<html><body class=\"x\">&nbsp;&lt;tag&gt;</body></html>",
    "!!!??? ... --- ___ *** ### $$$ %%% ^^^ &&& ((())) [[[]]] {{{}}}",
    "email: someone@example.com, url: https://example.org/a/b?c=d&e=f#g",
    "你好，世界！今天天气很好。我们去公园散步吧。",
    "日本語のテキスト、カタカナとひらがな。漢字も含む。",
    "한국어 텍스트입니다. 안녕하세요!",
    "مرحبا بالعالم! هذا نص عربي. مَرْحَبًا بِكُمْ",
    "नमस्ते दुनिया। हिन्दी में पाठ, क्षत्रिय, द्विज, श्रीमान्",
    "தமிழ் உரை மற்றும் বাংলা লেখা",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Здравствуй, мир! Привет как дела?",
    "Γειά σου Κόσμε! αβγδε ΑΒΓΔΕ",
    "עברית: שלום עולם",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵 1️⃣ ❤️ 🧑🏿‍💻",
    "zwj​zero width\u200bspace and\u200djoiner\u200c non-joiner\ufeffbom",
    "nbsp\u00a0here and\u00a0\u00a0twice, ideographic\u3000space\u3000\u3000end",
    "en\u2002em\u2003thin\u2009hair\u200anarrow\u202fmath\u205fline\u2028para\u2029",
    "decomposed e\u0301 a\u0300 o\u0308 n\u0303 vs composed é à ö ñ",
    "Angstrom \u212b ohm \u2126 kelvin \u212a fullwidth ＡＢＣ１２３ ﬁ ligature",
    "Hangul jamo \u1100\u1161\u11a8 vs 각",
    "Z̴̧̛a̷̡̛l̶̢̧g̵̨̛o̸̧̢ t̶̨̛e̷̢̛x̵̧̡t̴̢̛",
    "combining only: \u0301\u0302\u0303 after space \u0301x",
    "math ∑∫∂√∞ ≠ ≤ ≥ ± × ÷ → ⇒ ∀x∃y",
    "currency $100 €50 £30 ¥1000 ₹500 ₿0.01",
    "control\x01chars\x7f and\x0bvertical\x0cformfeed",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text<|im_end|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "partial <|im_start and <|im_end| and <|endoftext|><|endoftext|>",
    "<|im_start|><|im_start|>  <|im_end|>  ",
    "a" * 64,
    " " * 40 + "x",
    "\n" * 10,
    "\t \t \n \r\n \u00a0\n",
    "'s 's 'S 'T 'Re 're 'VE 'M 'LL 'D",
    "don't won't can't shouldn't y'all ma'am",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier",
    "v1.2.3-beta+build.456",
    "2026-12-01T08:23:09Z 10:40 UTC",
    "ALLCAPS lowercase MiXeD",
    "",
    " ",
    "x",
    "\u00e9",
    "🙂",
    "😀a😀",
    "a\u0308\u0301\u0323b",
    "\U0001f469\u200d\U0001f52c\U0001f469\U0001f3fd\u200d\U0001f680",
    "Ǆǅǆ ǈ ß ẞ İ ı ſ 'ſ",
    "ßtraße Straße STRASSE",
    "\x00null\x00",
]

# A character pool for random strings: several scripts, marks, whitespace
# kinds, digits, punctuation, emoji parts and special-token fragments.
POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + list(" \t\n\r'\"!?.,;:-_()[]{}<>|/\\@#$%^&*+=~`")
    + list("éàöñçßøåæœ")
    + list("你好世界中文字")
    + list("こんにちはカタ")
    + list("안녕하세요")
    + list("مرحبا")
    + list("नमस्तेक्षद्वि")
    + list("Привет")
    + ["\u0301", "\u0308", "\u064e", "\u094d", "\u0e31", "\ufe0f", "\u200d", "\u200b"]
    + ["\u00a0", "\u3000", "\u2009", "\u2028", "\x0b", "\x0c", "\x85"]
    + ["😀", "👍", "🏽", "👨", "👩", "👧", "🇺", "🇸", "❤"]
    + ["'s", "'ll", "'D", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>"]
    + ["  ", "   ", "\r\n", "\n\n", "\t\t", "123", "Hello", " world"]
)


def random_texts(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 60)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def training_corpus():
    texts = [t for t in CORPUS if t]
    texts += random_texts(7, 400)
    return texts * 3


def train_small_a():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    tok.add_tokens(["<think>", "</think>"])  # non-special added tokens
    return tok


def train_small_b():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    return tok


# Texts for small_c's added tokens with lstrip / rstrip / normalized flags.
FLAG_TEXTS = [
    "x  <L>y", "x<R> \t y", "a <LR> b", "<\u00e9>x", "<e\u0301>x", "a\u00a0<L>",
    "<L><L>  <R>  <R>", "  <L>", "<R>\n\n", "x \u3000<L>", "<LR><LR>", " <LR>\n<L>",
    "<|im_end|>  <L> <R> <|im_end|>", "<L", "L>", "<<L>>", "<RR>", "<think>  <L></think>",
    # single_word tokens "cat", "<W>" and "dog" (the latter also lstrip)
    "cat", "a cat b", "concat", "cats", "cat_x", "x_cat", "cat1", "1cat", "écat", "catα", "cat.",
    "x<W>y", " <W> ", "a<W>", "<W>a", "(<W>)", "cat\u0301", "a  dog", "adog", "a dogs", "_<W>",
    "cat\u00a0", "中cat", "Ⓐcat", "cat\u200d", "ⅫcatⅫ", "٣cat", "cat²", "‿cat", "cat-dog cat", "catcat cat",
]


def add_flag_tokens(tok):
    """small_c: small_a plus added tokens exercising lstrip/rstrip/normalized/single_word."""
    tok.add_special_tokens([AddedToken("<L>", lstrip=True, special=True), AddedToken("<R>", rstrip=True, special=True)])
    tok.add_tokens([AddedToken("<e\u0301>", normalized=True), AddedToken("<LR>", lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([
        AddedToken("cat", single_word=True, normalized=False),
        AddedToken("<W>", single_word=True, normalized=False),
        AddedToken("dog", single_word=True, lstrip=True, normalized=False),
    ])
    return tok


def string_merges(tok_json_str):
    """Rewrite merges from [a, b] pairs to "a b" strings (the older HF form)."""
    obj = json.loads(tok_json_str)
    obj["model"]["merges"] = [m if isinstance(m, str) else m[0] + " " + m[1] for m in obj["model"]["merges"]]
    return json.dumps(obj, ensure_ascii=False, indent=1)


def fixture_texts():
    return CORPUS + random_texts(20261201, 200)


def write_fixtures(tok, path, texts=None):
    lines = []
    for text in texts if texts is not None else fixture_texts():
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        ids_ns = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        lines.append({
            "text": text,
            "ids": ids,
            "ids_nospecial": ids_ns,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True),
        })
    with open(path, "w", encoding="utf-8") as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    print(f"wrote {path} ({len(lines)} lines)", file=sys.stderr)


def write_decode_fixtures(tok, path, seed):
    """Id sequences that cut UTF-8 characters apart, and random byte tokens."""
    vocab = tok.get_vocab()
    # alphabet() comes back in no fixed order; sort for reproducible output
    byte_ids = sorted(vocab[c] for c in pre_tokenizers.ByteLevel.alphabet() if c in vocab)
    specials = [i for i, t in tok.get_added_tokens_decoder().items()]
    rng = random.Random(seed)
    seqs = []
    for text in ["é", "你好", "😀", "👨‍👩‍👧", "नमस्ते", "a€b"]:
        ids = tok.encode(text, add_special_tokens=False).ids
        for cut in range(len(ids) + 1):
            seqs.append(ids[:cut])
            seqs.append(ids[cut:])
    for _ in range(150):
        n = rng.randint(1, 12)
        seq = []
        for _ in range(n):
            r = rng.random()
            if r < 0.7:
                seq.append(rng.choice(byte_ids))
            elif r < 0.85 and specials:
                seq.append(rng.choice(specials))
            else:
                seq.append(rng.randrange(tok.get_vocab_size()))
        seqs.append(seq)
    with open(path, "w", encoding="utf-8") as f:
        for ids in seqs:
            f.write(json.dumps({
                "ids": ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True),
            }, ensure_ascii=False) + "\n")
    print(f"wrote {path} ({len(seqs)} lines)", file=sys.stderr)


def main():
    if len(sys.argv) != 3:
        print("usage: gen_tokenizer_fixtures.py QWEN3_DIR OUT_DIR", file=sys.stderr)
        sys.exit(2)
    qdir, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "qwen3"), exist_ok=True)

    small_a = train_small_a()
    small_a.save(os.path.join(out, "small_a.json"), pretty=True)
    write_fixtures(small_a, os.path.join(out, "small_a.jsonl"))
    write_decode_fixtures(small_a, os.path.join(out, "small_a_decode.jsonl"), 1)

    small_c = add_flag_tokens(Tokenizer.from_str(small_a.to_str()))
    small_c.save(os.path.join(out, "small_c.json"), pretty=True)
    write_fixtures(small_c, os.path.join(out, "small_c.jsonl"), FLAG_TEXTS + CORPUS)

    small_b = train_small_b()
    with open(os.path.join(out, "small_b.json"), "w", encoding="utf-8") as f:
        f.write(string_merges(small_b.to_str()))
    small_b = Tokenizer.from_file(os.path.join(out, "small_b.json"))
    write_fixtures(small_b, os.path.join(out, "small_b.jsonl"))

    with open(os.path.join(qdir, "tokenizer.json"), "rb") as f:
        raw = f.read()
    gz_path = os.path.join(out, "qwen3", "tokenizer.json.gz")
    with open(gz_path, "wb") as fo, gzip.GzipFile(fileobj=fo, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(raw)
    with open(os.path.join(qdir, "tokenizer_config.json"), "rb") as f:
        cfg = f.read()
    with open(os.path.join(out, "qwen3", "tokenizer_config.json"), "wb") as f:
        f.write(cfg)
    # Qwen3's public generation_config.json (eos_token_id is a list).
    gen = {
        "bos_token_id": 151643,
        "do_sample": True,
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
        "temperature": 0.6,
        "top_k": 20,
        "top_p": 0.95,
    }
    with open(os.path.join(out, "qwen3", "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")

    qwen3 = Tokenizer.from_str(raw.decode("utf-8"))
    write_fixtures(qwen3, os.path.join(out, "qwen3.jsonl"))
    write_decode_fixtures(qwen3, os.path.join(out, "qwen3_decode.jsonl"), 2)

    # Qwen3 vocabulary with the Qwen3.5 pre-tokenizer regex swapped in.
    obj = json.loads(raw)
    split = obj["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split", split
    split["pattern"]["Regex"] = QWEN35_PATTERN
    qwen35 = Tokenizer.from_str(json.dumps(obj))
    write_fixtures(qwen35, os.path.join(out, "qwen35regex.jsonl"))


if __name__ == "__main__":
    main()
