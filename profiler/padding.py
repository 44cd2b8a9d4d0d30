"""How much of a token-budget batch is padding: a tokenized parallel corpus, batched as translation trainers batch.

Why: a batch of sentences is padded to its longest sentence and the GPU computes on every slot, so a
trainer that fills each batch to a token budget of *real* tokens (fairseq's `--max-tokens`, the paper's
authors' DistributedTokenBatchSampler) runs its kernels on more slots than tokens. The share of slots that
hold real tokens is the model's `--padding-efficiency`; it is a fact of the corpus and the batching rule,
so it is measured here, on the user's own corpus, not assumed.

The rule is the one the paper's authors' sampler applies (WangZesen/accum-adam-nips2024 at 77e43c8,
transformer/src/data/sampler.py, `_create_batches`), restated: sort the pairs by source + target length,
longest first; fill a batch in that order and close it before the pair that would take the batch's real
source + target tokens over twice the per-GPU budget, or either side's real tokens under `floor` (0.35
there) of its slots (pairs x that side's longest). Lengths count the sentence's tokens plus the special
tokens the trainer adds (the authors' preprocess.py wraps both sides in a start and an end token).

    python -m profiler.padding train.tok.en train.tok.de --tokens-per-gpu 3125 --tokens-per-gpu 1562

Each file holds one sentence per line, tokenized as the trainer sees it (subword units separated by spaces:
the output of your BPE or SentencePiece step); line i of the two files is one pair.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from profiler.cli_parser import OneLineParser

SAMPLER_FLOOR = 0.35  # the authors' DistributedTokenBatchSampler(batch_efficiency=0.35)
SPECIAL_TOKENS = 2  # a start and an end token on each side (the authors' preprocess.py `convert`)


@dataclass(frozen=True)
class Padding:
    """Real tokens over padded slots of every batch of a corpus, per side and for both sides together
    (the model's unit is one source and one target token, so both sides' slots are its slots)."""

    tokens_per_gpu: int
    batches: int
    source: float
    target: float
    both: float


def batch_padding(
    source_lengths: list[int], target_lengths: list[int], tokens_per_gpu: int, floor: float = SAMPLER_FLOOR
) -> Padding:
    """The padding of a corpus batched by the rule above (module docstring) at `tokens_per_gpu` real
    tokens per side per batch. A pair longer than the whole budget gets a batch of its own."""
    if len(source_lengths) != len(target_lengths):
        raise ValueError(f"{len(source_lengths)} source lengths but {len(target_lengths)} target lengths")
    if not source_lengths:
        raise ValueError("the corpus has no sentence pairs")
    if tokens_per_gpu < 1:
        raise ValueError(f"tokens per GPU must be at least 1, got {tokens_per_gpu}")
    if not 0 <= floor <= 1:
        raise ValueError(f"the floor must be in [0, 1], got {floor}")
    order = sorted(range(len(source_lengths)), key=lambda i: -(source_lengths[i] + target_lengths[i]))
    real = [0, 0]  # source, target tokens over all batches
    slots = [0, 0]
    batches = 0
    count = src = tgt = src_max = tgt_max = 0
    for i in order:
        s, t = source_lengths[i], target_lengths[i]
        next_src, next_tgt, next_src_max, next_tgt_max = src + s, tgt + t, max(src_max, s), max(tgt_max, t)
        if count and (
            next_src + next_tgt > 2 * tokens_per_gpu
            or next_src < floor * next_src_max * (count + 1)
            or next_tgt < floor * next_tgt_max * (count + 1)
        ):
            real[0], real[1] = real[0] + src, real[1] + tgt
            slots[0], slots[1] = slots[0] + src_max * count, slots[1] + tgt_max * count
            batches += 1
            count = src = tgt = src_max = tgt_max = 0
            next_src, next_tgt, next_src_max, next_tgt_max = s, t, s, t
        count, src, tgt, src_max, tgt_max = count + 1, next_src, next_tgt, next_src_max, next_tgt_max
    real[0], real[1] = real[0] + src, real[1] + tgt
    slots[0], slots[1] = slots[0] + src_max * count, slots[1] + tgt_max * count
    return Padding(
        tokens_per_gpu=tokens_per_gpu,
        batches=batches + 1,
        source=real[0] / slots[0],
        target=real[1] / slots[1],
        both=(real[0] + real[1]) / (slots[0] + slots[1]),
    )


def sentence_lengths(path: Path, special_tokens: int = SPECIAL_TOKENS) -> list[int]:
    """Tokens per line of a tokenized corpus file (space-separated units), plus the special tokens."""
    try:
        with path.open(encoding="utf-8", errors="replace") as lines:
            return [len(line.split()) + special_tokens for line in lines]
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--tokens-per-gpu takes a whole number of tokens, got {text!r}") from None
    if value < 1:
        raise ValueError(f"--tokens-per-gpu must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m profiler.padding", description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the source side, one tokenized sentence per line")
    parser.add_argument("target", type=Path, help="the target side, line i translating source line i")
    parser.add_argument(
        "--tokens-per-gpu",
        action="append",
        required=True,
        help="real tokens per side in one GPU's batch (the trainer's max tokens // GPUs); repeatable",
    )
    parser.add_argument(
        "--floor",
        type=float,
        default=SAMPLER_FLOOR,
        help=f"close a batch below this share of real tokens per side (default {SAMPLER_FLOOR:g}, the authors')",
    )
    parser.add_argument(
        "--special-tokens",
        type=int,
        default=SPECIAL_TOKENS,
        help=f"tokens the trainer adds to each sentence (default {SPECIAL_TOKENS}: start and end)",
    )
    args = parser.parse_args(argv)
    try:
        budgets = [_positive_int(text) for text in args.tokens_per_gpu]
        if args.special_tokens < 0:
            raise ValueError(f"--special-tokens must be 0 or more, got {args.special_tokens}")
        source = sentence_lengths(args.source, args.special_tokens)
        target = sentence_lengths(args.target, args.special_tokens)
        if len(source) != len(target):
            raise ValueError(
                f"{args.source} has {len(source):,} lines but {args.target} has {len(target):,}: "
                "give the two sides of one parallel corpus"
            )
        results = [batch_padding(source, target, budget, args.floor) for budget in budgets]
    except ValueError as exc:
        parser.error(str(exc))
    print(
        f"{len(source):,} sentence pairs; batches as the token-budget rule cuts them (floor {args.floor:g})"
    )
    print(f"{'tokens/GPU':>10} {'batches':>9} {'source':>7} {'target':>7} {'both':>7}")
    for r in results:
        print(f"{r.tokens_per_gpu:>10,} {r.batches:>9,} {r.source:>7.3f} {r.target:>7.3f} {r.both:>7.3f}")
    print("give `both` as --padding-efficiency at that batch per GPU (rtmodel advise --help)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
