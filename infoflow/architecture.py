"""The architecture InfoFlow reasons about: only the quantities its cost laws depend on."""
from __future__ import annotations

from dataclasses import dataclass

from tfcert.errors import InputError

MAX_LAYERS = 64        # layers an architecture may have (each is a block of the z3 encoding)
MAX_HEADS = 4096       # heads per layer (a witness lists every head)


@dataclass(frozen=True)
class Architecture:
    """T input tokens in R^d, embedding dimension E, ``heads[l]`` heads in layer l+1.

    Position T+1 is the readout. ``positional`` enables position-specific aggregation.
    """

    T: int
    d: int = 1
    E: int = 1
    heads: tuple[int, ...] = (1,)
    positional: bool = False

    def __post_init__(self) -> None:
        for option, value in (("--T", self.T), ("--d", self.d), ("--E", self.E)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{option}: must be an integer >= 1, got {value!r}")
        if not self.heads:
            raise InputError("--heads: at least one layer is needed")
        if len(self.heads) > MAX_LAYERS:
            raise InputError(f"--heads: at most {MAX_LAYERS} layers, got {len(self.heads)}")
        for i, h in enumerate(self.heads):
            if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h <= MAX_HEADS:
                raise InputError(f"--heads: entry {i + 1} must be an integer in 0..{MAX_HEADS}, "
                                 f"got {h!r}")

    @property
    def layers(self) -> int:
        return len(self.heads)

    def with_heads(self, heads: tuple[int, ...]) -> "Architecture":
        return Architecture(self.T, self.d, self.E, tuple(heads), self.positional)

    def to_json(self) -> dict:
        return {"T": self.T, "d": self.d, "E": self.E, "heads": list(self.heads),
                "positional": self.positional}


def parse_heads(text: str) -> tuple[int, ...]:
    """Parse ``--heads 1,2,3``; the error names the option and the bad entry."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(p == "" for p in parts):
        raise InputError(f"--heads: expected a comma-separated list of integers, got {text!r}")
    heads = []
    for i, p in enumerate(parts):
        try:
            heads.append(int(p))
        except ValueError:
            shown = p if len(p) <= 40 else p[:37] + "..."
            raise InputError(f"--heads: entry {i + 1} is not an integer: {shown!r}") from None
    return tuple(heads)
