#!/usr/bin/env python3
"""Evaluate the exported default model and write the files that ship with it.

    python3 scripts/train-default/evaluate.py --work build/train-default --model models/tiny-shakespeare

Reads MODEL (the HF directory train.py --export wrote) and WORK (prepare.py's token ids) and
writes into MODEL:

    eval.json            held-out perplexity of the model and of the unigram baseline of the same
                         tokenizer (add-one smoothed counts of the training ids), the MTP head's held-out
                         loss, its teacher-forced agreement with the model's own greedy choice (the
                         PyTorch proxy of k = 1 greedy acceptance), and greedy / sampled text samples
    bench_corpus.ids     the first 16384 held-out token ids (ninfer-bench --corpus), 16 per line
    tokenizer_check.json held-out lines and edge cases with the ids HF tokenizers gives them
                         (pkg/tokenizer must reproduce them exactly)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import Qwen3_5ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import MTP, SEQ  # noqa: E402

CORPUS_TOKENS = 16384
PROMPTS = ["KING. ", "Enter HAMLET.\n\n  Ham. To be, or not to be,", "My lord, I"]


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM.from_pretrained(a.model, attn_implementation="eager", dtype=torch.float32).eval()
    mtp = MTP(model.config).eval()
    sd = {k[4:]: v for k, v in load_file(os.path.join(a.model, "model.safetensors")).items() if k.startswith("mtp.")}
    mtp.load_state_dict(sd, strict=True)
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    train = np.fromfile(os.path.join(a.work, "train.u16"), dtype="<u2").astype(np.int64)
    held = np.fromfile(os.path.join(a.work, "heldout.u16"), dtype="<u2").astype(np.int64)
    V = model.config.vocab_size

    # Held-out loss over every non-overlapping SEQ window (first token of each window has no context).
    n = (len(held) - 1) // SEQ
    main_sum = mtp_sum = 0.0
    main_n = mtp_n = 0
    agree = agree_n = 0
    for i in range(0, n, 8):
        ids = torch.from_numpy(np.stack([held[j * SEQ:(j + 1) * SEQ] for j in range(i, min(n, i + 8))]))
        out = model.model(input_ids=ids, use_cache=False)
        h = out.last_hidden_state
        lg = model.lm_head(h)
        main_sum += float(F.cross_entropy(lg[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum"))
        main_n += ids[:, 1:].numel()
        ml = mtp(model, ids, h)  # row t predicts ids[t+2]
        mtp_sum += float(F.cross_entropy(ml[:, :-1].reshape(-1, V), ids[:, 2:].reshape(-1), reduction="sum"))
        mtp_n += ids[:, 2:].numel()
        # Proxy of greedy k=1 acceptance: the draft argmax MTP(t) against the model's own greedy token
        # at t+1 (given the true ids[..t+1]).
        agree += int((ml.argmax(-1) == lg[:, 1:].argmax(-1)).sum())
        agree_n += ml.shape[0] * ml.shape[1]
    counts = np.bincount(train, minlength=V).astype(np.float64) + 1.0
    p = counts / counts.sum()
    uni = float(-np.log(p[held[1:]]).mean())
    res = dict(
        heldout_tokens=int(main_n), heldout_loss=main_sum / main_n, heldout_ppl=math.exp(main_sum / main_n),
        unigram_loss=uni, unigram_ppl=math.exp(uni),
        mtp_heldout_loss=mtp_sum / mtp_n, mtp_heldout_ppl=math.exp(mtp_sum / mtp_n),
        mtp_greedy_agreement=agree / agree_n,
    )

    samples = []
    for prompt in PROMPTS:
        ids = tok.encode(prompt, add_special_tokens=False).ids
        g = model.generate(torch.tensor([ids]), max_new_tokens=80, do_sample=False, num_beams=1, pad_token_id=0,
                           eos_token_id=None)
        s = model.generate(torch.tensor([ids]), max_new_tokens=80, do_sample=True, temperature=0.8, top_k=40,
                           pad_token_id=0, eos_token_id=None)
        samples.append(dict(prompt=prompt, greedy=tok.decode(g[0, len(ids):].tolist()),
                            sampled_t08_k40_seed0=tok.decode(s[0, len(ids):].tolist())))
    res["samples"] = samples
    write_json(os.path.join(a.model, "eval.json"), res)

    ids = held[:CORPUS_TOKENS]
    tmp = os.path.join(a.model, "bench_corpus.ids.tmp")
    with open(tmp, "w") as f:
        for i in range(0, len(ids), 16):
            f.write(" ".join(str(int(x)) for x in ids[i:i + 16]) + "\n")
    os.replace(tmp, os.path.join(a.model, "bench_corpus.ids"))

    lines = [ln for ln in open(os.path.join(a.work, "heldout.txt"), encoding="utf-8").read().split("\n") if ln.strip()]
    rnd = random.Random(7)
    texts = rnd.sample(lines, 64) + [
        "", " ", "\n\n", "  Ham. O, that this too too solid flesh would melt,\nThaw, and resolve itself into a dew!",
        "<|im_start|>user\nWho art thou?<|im_end|>\n<|im_start|>assistant\n", "café — naïve “quotes” ’tis 1623 ½",
        "ALL'S WELL... 'tis\r\nthe end<|endoftext|>next",
    ]
    write_json(os.path.join(a.model, "tokenizer_check.json"),
               dict(tokenizer="tokenizer.json", note="ids from HF tokenizers " + __import__("tokenizers").__version__ +
                    ", encode(text, add_special_tokens=False)",
                    cases=[dict(text=t, ids=tok.encode(t, add_special_tokens=False).ids) for t in texts]), indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}, indent=1), file=sys.stderr)
    for s in samples:
        print(repr(s["prompt"]), "→", repr(s["greedy"][:200]), file=sys.stderr)


if __name__ == "__main__":
    main()
