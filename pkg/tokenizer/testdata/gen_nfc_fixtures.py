#!/usr/bin/env python3
"""Generate pkg/tokenizer/testdata/nfc.jsonl with Hugging Face `tokenizers`.

usage: python3 pkg/tokenizer/testdata/gen_nfc_fixtures.py   (from the repository root)

Reads only committed files (testdata/qwen3/tokenizer.json.gz, small_a.json).
One JSON object per line:

  text         the input
  nfc          normalizers.NFC().normalize_str(text): HF's NFC (the
               unicode-normalization-alignments crate: no stream-safe U+034F
               after 30 combining marks, Unicode 9.0 combining classes)
  qwen3        Qwen3 tokenizer.json encode(text, add_special_tokens=False)
  qwen35regex  the same vocabulary with the Qwen3.5 Split regex
  small_a      small_a.json (Sequence[NFC] normalizer, Qwen3.5 regex)

The texts stress what Go's golang.org/x/text/unicode/norm does differently:
runs of more than 30 non-starters (norm inserts U+034F), and the marks
Unicode 10.0-15.0 gave a combining class that HF's tables (Unicode 9.0) do
not know, plus U+11938 (a canonical decomposition added in Unicode 13.0).
It also writes testdata/hf_unicode.json, HF's Unicode data probed over every
code point (surrogates excluded), as sorted [lo, hi] ranges:

  L, N, M, s     what the Split pre-tokenizer's regex (Oniguruma) matches
                 with \p{L}, \p{N}, \p{M} and \s
  non_starters   code points without a canonical decomposition that HF's
                 NFD reorders (a non-zero canonical combining class)
  decomposable   code points HF's NFD changes

Deterministic: random texts use a fixed seed. Versions used for the
committed file: Python 3.11, tokenizers 0.23.3.
"""

import gzip
import json
import os
import random

import tokenizers
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))

QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

ACUTE, GRAVE, TILDE, DOT_BELOW, GRAVE_BELOW, YPOGEGRAMMENI = "\u0301", "\u0300", "\u0303", "\u0323", "\u0316", "\u0345"

TEXTS = [
    # the issue: a + 31 acutes; around the 30-mark limit and far beyond
    *("a" + ACUTE * k for k in (29, 30, 31, 32, 40, 100)),
    *("word a" + ACUTE * k + " next" for k in (31, 40, 100)),
    # composition and reordering across the 30-mark point
    "e" + GRAVE_BELOW * 30 + ACUTE,  # é + 30 grave-below (not blocked: ccc 220 < 230)
    "e" + GRAVE_BELOW * 40 + ACUTE + " é",
    "a" + (ACUTE + GRAVE_BELOW) * 20,  # reorders all 220s before the 230s, then á
    "o" + DOT_BELOW + "\u0302" + ACUTE * 35,  # ộ + 34 acutes (ọ, then ộ; the rest blocked)
    "u" + "\u031b" * 31 + ACUTE,  # horn ccc 216: ú composes past 31 horns
    ACUTE * 35 + "a" + ACUTE,  # leading non-starters
    "a" + ACUTE * 31 + "\u034f" + ACUTE,  # a CGJ of the input stays
    "a" + ACUTE * 31 + " e\u0301 " + "o" + "\u0308" * 33 + " n\u0303",
    # mixed scripts, long runs
    "Z" + "".join(random.Random(7).choice("\u0300\u0301\u0302\u0303\u0316\u0317\u0323\u0324\u0334\u0335\u0338\u0345\u035c\u0361") for _ in range(60)) + "algo t\u0336\u0335e\u0334x\u0337t",
    "क" + "\u093c" * 35 + "ि नमस्ते",
    "ब" + "\u064e\u0651" * 20 + " مرحبا",
    "ש" + "\u05b0\u05bc\u05c1" * 12 + " שלום",
    "ก" + "\u0e48" * 40 + " ไทย",
    "α" + "\u0313\u0300\u0345" * 11 + " ᾂ",
    "\u1100\u1161\u11a8" + ACUTE * 35 + " 각",
    "\u1100\u1161" + GRAVE * 31 + "\u11a8",  # T after marks: no LVT
    "\u1100" + "\u1161" * 40,
    "日本" + "\u3099" * 33 + "語 か\u3099",
    "emoji 😀" + "\u20dd" * 31 + " 👍🏽",
    "a" + ACUTE * 31 + "b" + GRAVE * 31 + "c" + TILDE * 31,
    # Unicode 9.0 classes in HF: these marks are starters (ccc 0) there
    "a\u07fd\u0301",
    "a\u0301\u07fd",
    "x\u0345\u08d3",
    "\u0628\u08ca\u064e",
    "క\u0c3c\u0c4d",
    "a\u1df6\u0301 a\u0301\u1df6",
    "a\u1ac0\u0301",
    "a" + "\u07fd\u0316" * 20,
    "\U00011935\U00011930 \U00011938",
    "\U00011938" + ACUTE * 31,
    "\U0001e4ec\u0301 x\U00011f41\u0334",
]

BASES = list("aeiouAEIOUnckzZ") + ["α", "ш", "ب", "ש", "क", "ก", "\u1100", "\uac00", "日", "😀", " ", "\n", "1", "\U00011935"]
MARKS = [
    "\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u0316", "\u031b", "\u0323", "\u0327", "\u0334",
    "\u0345", "\u035c", "\u0361", "\u064e", "\u0651", "\u05b0", "\u05bc", "\u093c", "\u094d", "\u0e48", "\u3099",
    "\u1161", "\u11a8", "\u034f", "\U00011930",
    # marks HF's Unicode 9.0 tables treat as starters
    "\u07fd", "\u0898", "\u08d3", "\u0c3c", "\u0d3b", "\u1abf", "\u1df6", "\u1dfa", "\U00010d24", "\U0001e2ae",
]


def random_texts(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 4)):
            parts.append(rng.choice(BASES))
            k = rng.choice([0, 1, 2, 3, 29, 30, 31, 35, 64]) if rng.random() < 0.6 else rng.randint(0, 8)
            parts.extend(rng.choice(MARKS) for _ in range(k))
        out.append("".join(parts))
    return out


def ranges(cps):
    out = []
    for c in cps:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def unicode_tables():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    tables = {"tokenizers": tokenizers.__version__}
    for name, pat in (("L", r"\p{L}"), ("N", r"\p{N}"), ("M", r"\p{M}"), ("s", r"\s")):
        # Removed: the pieces left are the code points the class does not match.
        split = pre_tokenizers.Split(Regex(pat), "removed")
        member = []
        for i in range(0, len(cps), 4096):
            chunk = cps[i:i + 4096]
            text = "".join(map(chr, chunk))
            left = bytearray(len(chunk))
            for piece, (a, b) in split.pre_tokenize_str(text):
                assert text[a:b] == piece
                left[a:b] = b"\x01" * (b - a)
            member.extend(c for c, x in zip(chunk, left) if not x)
        tables[name] = ranges(member)
    nfd = normalizers.NFD()
    non_starters, decomposable = [], []
    for c in cps:
        ch = chr(c)
        d = nfd.normalize_str(ch)
        if d != ch:
            decomposable.append(c)
            continue
        # x c U+0334 (ccc 1) reorders when ccc(c) > 1; x U+0345 (ccc 240) c
        # when 0 < ccc(c) < 240.
        if nfd.normalize_str("x" + ch + "\u0334") != "x" + ch + "\u0334" or nfd.normalize_str("x\u0345" + ch) != "x\u0345" + ch:
            non_starters.append(c)
    tables["non_starters"] = ranges(non_starters)
    tables["decomposable"] = ranges(decomposable)
    path = os.path.join(HERE, "hf_unicode.json")
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(json.dumps(k) + ": " + json.dumps(v, separators=(",", ":")) for k, v in tables.items()) + "\n}\n")
    print(f"wrote {path}")


def main():
    with gzip.open(os.path.join(HERE, "qwen3", "tokenizer.json.gz"), "rb") as f:
        raw = f.read().decode("utf-8")
    qwen3 = Tokenizer.from_str(raw)
    obj = json.loads(raw)
    split = obj["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split", split
    split["pattern"]["Regex"] = QWEN35_PATTERN
    qwen35 = Tokenizer.from_str(json.dumps(obj))
    small_a = Tokenizer.from_file(os.path.join(HERE, "small_a.json"))
    nfc = normalizers.NFC()
    path = os.path.join(HERE, "nfc.jsonl")
    texts = TEXTS + random_texts(20261202, 40)
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            line = {
                "text": text,
                "nfc": nfc.normalize_str(text),
                "qwen3": qwen3.encode(text, add_special_tokens=False).ids,
                "qwen35regex": qwen35.encode(text, add_special_tokens=False).ids,
                "small_a": small_a.encode(text, add_special_tokens=False).ids,
            }
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {path} ({len(texts)} lines)")
    unicode_tables()


if __name__ == "__main__":
    main()
