"""A kernel configuration: a frozen mapping of named parameters plus num_warps and num_stages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np


class ConfigError(ValueError):
    """A config string or value that cannot be a configuration."""


@dataclass(frozen=True)
class Config(Mapping):
    """Named integer parameters (e.g. BLOCK_M) plus `num_warps` and `num_stages`.

    Behaves as a read-only mapping over all of them, hashes by value, and prints in the same
    form that `parse_config` reads: 'BLOCK_M=128,BLOCK_N=128,...,num_warps=8,num_stages=3'.
    """

    params: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    @classmethod
    def make(cls, num_warps: int, num_stages: int, **params: int) -> "Config":
        return cls(tuple(params.items()), int(num_warps), int(num_stages))

    @cached_property
    def _values(self) -> dict[str, int]:
        """Every parameter by name, made once (a config is read many times per launch)."""
        return {**dict(self.params), "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __getitem__(self, key: str) -> int:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        yield from (name for name, _ in self.params)
        yield "num_warps"
        yield "num_stages"

    def __len__(self) -> int:
        return len(self.params) + 2

    def kernel_params(self) -> dict[str, int]:
        """The parameters passed to the kernel as arguments (everything but warps and stages)."""
        return dict(self.params)

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.items())


_SHORT = {"GROUP_M": "gm", "GROUP_SIZE_M": "gm", "SPLIT_K": "sk", "ORDER": "ord", "TMA": "tma", "PERSISTENT": "p",
          "FIXUP": "fx", "num_warps": "w", "num_stages": "s"}
_TILE = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")  # GEMM's, MoE's (vLLM's)


def config_label(config: Mapping) -> str:
    """Compact form for tables: '128x256x64 gm8 sk1 w8 s3'; a composite tile (BLOCK_N2 > 0) '128x256+64x64';
    MoE's (vLLM's names) '64x128x64 gm16 w4 s3'."""
    tile = "x".join(str(config[k]) + (f"+{config['BLOCK_N2']}" if k == "BLOCK_N" and config.get("BLOCK_N2") else "")
                    for k in _TILE if k in config)
    rest = " ".join(f"{_SHORT.get(k, k)}{v}" for k, v in config.items() if k not in _TILE and k != "BLOCK_N2")
    return f"{tile} {rest}"


def parse_config(text: str, names: Iterable[str] | None = None) -> Config:
    """Parse 'BLOCK_M=128,BLOCK_N=64,num_warps=4,num_stages=3'.

    With `names`, every name must be one of them (num_warps and num_stages always allowed) and
    all of them must be given.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("empty config string; expected NAME=VALUE pairs separated by commas")
    values: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ConfigError(f"config item {part.strip()!r} is not NAME=VALUE")
        name, raw = (s.strip() for s in part.split("=", 1))
        if not name.replace("_", "").isalnum():
            raise ConfigError(f"bad parameter name {name!r}")
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"parameter {name}: {raw!r} is not an integer") from None
        if name in values:
            raise ConfigError(f"parameter {name} given twice")
        values[name] = value
    for required in ("num_warps", "num_stages"):
        if required not in values:
            raise ConfigError(f"config {text!r} lacks {required}")
    if names is not None:
        allowed = set(names)
        unknown = set(values) - allowed - {"num_warps", "num_stages"}
        if unknown:
            raise ConfigError(f"unknown parameter(s) {', '.join(sorted(unknown))}; expected {', '.join(sorted(allowed))}")
        missing = allowed - set(values)
        if missing:
            raise ConfigError(f"missing parameter(s) {', '.join(sorted(missing))}")
        ordered = [(n, values[n]) for n in names]
    else:
        ordered = [(n, v) for n, v in values.items() if n not in ("num_warps", "num_stages")]
    return Config(tuple(ordered), values["num_warps"], values["num_stages"])


def configs_to_columns(configs: list[Config]) -> dict[str, np.ndarray]:
    """Column form (name -> int64 array) of a list of configs with the same parameter names."""
    if not configs:
        return {}
    names = list(configs[0])
    return {name: np.array([c[name] for c in configs], dtype=np.int64) for name in names}
