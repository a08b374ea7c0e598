"""The tests' runs of examples/train_lm.py: a model small enough to train in a few seconds on one
thread, set with the flags a user would type for it."""

QUICK_STEPS = 30
QUICK_VOCAB = 512
QUICK = ["--steps", str(QUICK_STEPS), "--context", "64", "--dim", "64", "--layers", "2", "--heads", "2",
         "--ffn-dim", "176", "--vocab", str(QUICK_VOCAB), "--eval-interval", "10", "--eval-batches", "2",
         "--sample-tokens", "24", "--threads", "1"]


def quick_value(flag: str) -> int:
    """The value QUICK gives `flag` (e.g. "--dim")."""
    return int(QUICK[QUICK.index(flag) + 1])
