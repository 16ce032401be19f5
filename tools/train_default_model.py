"""Train the small GLM-4 model that ships inside the package as the engine's default.

No machine of this project can download a model, so `autoglm generate` and `autoglm serve`
need one that is built here, from a public-domain corpus, in well under an hour on two CPU
cores. Everything is seeded, so the same command gives the same weights. The corpus ships in
the package (autoglm/assets/corpus), split by `autoglm.corpus` exactly as `autoglm eval-ppl
--held-out` splits it; run from the virtualenv that `make install` sets up:

    .venv/bin/python tools/train_default_model.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

# The machine is shared: OpenMP threads that spin while waiting lose most of their speed
# whenever another process holds a core, so they sleep instead. Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import GenerationConfig, Glm4Config, Glm4ForCausalLM, PreTrainedTokenizerFast  # noqa: E402

from autoglm.corpus import CORPUS_PATH, TRAIN_FRACTION, read_corpus  # noqa: E402
from autoglm.model_paths import DEFAULT_MODEL_DIR  # noqa: E402

END_OF_TEXT = "<|endoftext|>"
ROLE_MARKERS = ["<|system|>", "<|user|>", "<|assistant|>"]

# A chat reads as a scene of the play, the form the model learned: "NAME:\nline\n\n".
# The user asks as Romeo, the model answers as Friar Laurence, his counsellor; a `name`
# field overrides either. A system message has no speaker: it stands as a stage direction.
CHAT_TEMPLATE = (
    "{%- set speakers = {'user': 'ROMEO', 'assistant': 'FRIAR LAURENCE'} -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}"
    "{{ message.content | trim ~ '\\n\\n' }}"
    "{%- else -%}"
    "{{ (message.name or speakers.get(message.role, message.role)) | upper ~ ':\\n' }}"
    "{{ message.content | trim ~ '\\n\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ speakers.assistant ~ ':\\n' }}"
    "{%- endif -%}"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_PATH,
                        help="UTF-8 text; its last tenth is held out (default: the corpus shipped in the package)")
    parser.add_argument("--out", type=Path, default=DEFAULT_MODEL_DIR,
                        help="checkpoint folder to write (default: the package's default model)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--tokenizer", type=Path,
                        help="reuse this checkpoint folder's tokenizer instead of training one (a draft model for "
                             "speculative decoding must share its target's: pass the default model's folder)")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--intermediate-size", type=int, default=768)
    parser.add_argument("--context", type=int, default=256, help="training sequence length")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per step")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    parser.add_argument("--min-lr-ratio", type=float, default=0.1, help="final lr / peak lr")
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--attention-dropout", type=float, default=0.0)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast for training")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


@dataclass
class TokenizedSplit:
    """One side of the split; `chars` turns nats per token into nats per character."""

    tokens: torch.Tensor
    chars: int

    @property
    def tokens_per_char(self) -> float:
        return len(self.tokens) / self.chars


def train_tokenizer(train_text: str, vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE learned from the training split only, so validation stays unseen."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT, *ROLE_MARKERS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([train_text], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        extra_special_tokens=ROLE_MARKERS,
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_length,
    )


def tokenize(tokenizer: PreTrainedTokenizerFast, text: str) -> TokenizedSplit:
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    return TokenizedSplit(torch.tensor(ids, dtype=torch.long), len(text))


def build_model(args: argparse.Namespace, tokenizer: PreTrainedTokenizerFast) -> Glm4ForCausalLM:
    config = Glm4Config(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.hidden_size // args.heads,
        max_position_embeddings=args.context,
        attention_dropout=args.attention_dropout,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        attention_bias=True,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    return Glm4ForCausalLM(config)


def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warmup, then cosine decay from the peak down to `min_lr_ratio` of it."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return args.lr * (args.min_lr_ratio + (1.0 - args.min_lr_ratio) * cosine)


def random_windows(tokens: torch.Tensor, batch_size: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Windows at seeded random offsets: a fixed data order that still covers every position."""
    starts = torch.randint(0, len(tokens) - length, (batch_size,), generator=generator)
    return torch.stack([tokens[start : start + length] for start in starts.tolist()])


def evaluation_windows(tokens: torch.Tensor, context: int, limit: int | None = None) -> torch.Tensor:
    """Back-to-back windows sharing one token at each seam, so every token but the first is
    predicted exactly once."""
    starts = list(range(0, len(tokens) - context - 1, context))
    if limit is not None:
        step = max(1, len(starts) // limit)
        starts = starts[::step][:limit]
    return torch.stack([tokens[start : start + context + 1] for start in starts])


@torch.no_grad()
def mean_token_loss(model: Glm4ForCausalLM, windows: torch.Tensor, bf16: bool, batch_size: int = 16) -> float:
    model.eval()
    total, count = 0.0, 0
    for batch in windows.split(batch_size):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=batch[:, :-1]).logits
        losses = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten(), reduction="sum")
        total += losses.item()
        count += batch[:, 1:].numel()
    model.train()
    return total / count


def report_loss(label: str, loss_per_token: float, split: TokenizedSplit) -> dict[str, float]:
    per_char = loss_per_token * split.tokens_per_char
    print(f"  {label}: {loss_per_token:.4f} nats/token, {per_char:.4f} nats/char", flush=True)
    return {"per_token": loss_per_token, "per_char": per_char}


def train(model: Glm4ForCausalLM, train_split: TokenizedSplit, val_split: TokenizedSplit, args: argparse.Namespace) -> None:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    val_windows = evaluation_windows(val_split.tokens, args.context)
    data_order = torch.Generator().manual_seed(args.seed)
    started, recent_losses = time.perf_counter(), []
    model.train()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        batch = random_windows(train_split.tokens, args.batch_size, args.context + 1, data_order)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        recent_losses.append(loss.item())
        if (step + 1) % args.log_every == 0:
            elapsed = time.perf_counter() - started
            tokens_per_s = (step + 1) * args.batch_size * args.context / elapsed
            print(
                f"step {step + 1}/{args.steps} lr {learning_rate(step, args):.2e} "
                f"train {sum(recent_losses) / len(recent_losses):.4f} {tokens_per_s:.0f} tok/s {elapsed:.0f}s",
                flush=True,
            )
            recent_losses = []
        if (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            report_loss("val", mean_token_loss(model, val_windows, args.bf16), val_split)


def saved_dtypes(weights: Path) -> set[str]:
    with safe_open(weights, framework="pt") as tensors:
        return {str(tensors.get_slice(name).get_dtype()) for name in tensors.keys()}


def save(
    model: Glm4ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    args: argparse.Namespace,
    training_log: dict,
) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_length=args.context,
    )
    model.to(torch.bfloat16).save_pretrained(args.out)
    # The chat template stays inside tokenizer_config.json, where most readers look for it.
    tokenizer.save_pretrained(args.out, save_jinja_files=False)
    dtypes = saved_dtypes(args.out / "model.safetensors")
    if dtypes != {"BF16"}:
        raise RuntimeError(f"weights were saved as {dtypes}, expected BF16 only")
    (args.out / "training_log.json").write_text(json.dumps(training_log, indent=2) + "\n")


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    corpus = read_corpus(args.corpus)
    train_text, val_text = corpus.train, corpus.held_out
    if args.tokenizer is None:
        tokenizer = train_tokenizer(train_text, args.vocab_size, args.context)
    else:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.tokenizer)
    train_split, val_split = tokenize(tokenizer, train_text), tokenize(tokenizer, val_text)
    print(
        f"tokens: train {len(train_split.tokens)} ({train_split.tokens_per_char:.4f}/char), "
        f"val {len(val_split.tokens)} ({val_split.tokens_per_char:.4f}/char)",
        flush=True,
    )

    model = build_model(args, tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"parameters: {parameters:,}", flush=True)
    train(model, train_split, val_split, args)
    training_seconds = time.perf_counter() - started

    print("final evaluation:", flush=True)
    val_windows = evaluation_windows(val_split.tokens, args.context)
    train_windows = evaluation_windows(train_split.tokens, args.context, limit=len(val_windows))
    val_loss = report_loss("val", mean_token_loss(model, val_windows, args.bf16), val_split)
    train_loss = report_loss("train", mean_token_loss(model, train_windows, args.bf16), train_split)

    hyper_parameters = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    hyper_parameters["corpus"] = args.corpus.name
    if args.tokenizer is not None:
        hyper_parameters["tokenizer"] = args.tokenizer.name
    hyper_parameters.pop("out")
    save(
        model,
        tokenizer,
        args,
        {
            "hyper_parameters": hyper_parameters,
            "parameters": parameters,
            "train_fraction": TRAIN_FRACTION,
            "tokens": {"train": len(train_split.tokens), "val": len(val_split.tokens)},
            "tokens_per_char": {"train": train_split.tokens_per_char, "val": val_split.tokens_per_char},
            "loss": {"train": train_loss, "val": val_loss},
            "training_seconds": round(training_seconds, 1),
            "wall_seconds": round(time.perf_counter() - started, 1),
            "torch": torch.__version__,
        },
    )
    print(f"saved to {args.out} in {time.perf_counter() - started:.0f}s", flush=True)


if __name__ == "__main__":
    main()
