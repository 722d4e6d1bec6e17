"""The validators every config shares: each raises ConfigError with a message that names
the flag and what it accepts, so a bad setting fails before any process starts."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional

from sac_distributed.errors import ConfigError

MAX_SEED = 2**32 - 1  # TensorFlow's and NumPy's global seeds are 32-bit


def validate_rate_limit(samples_per_insert: float, error_buffer: Optional[float]) -> None:
    """Raises ConfigError unless Reverb would accept this SampleToInsertRatio."""
    _require(
        isinstance(samples_per_insert, (int, float))
        and math.isfinite(samples_per_insert)
        and samples_per_insert > 0,
        f"samples_per_insert must be a finite number > 0 (or 0 for no ratio), got "
        f"{samples_per_insert!r}. "
        "It is the average number of times each transition is sampled (e.g. "
        "batch_size * train steps per env step).",
    )
    if error_buffer is None:
        return
    floor = max(1.0, samples_per_insert)
    _require(
        math.isfinite(error_buffer) and error_buffer >= floor,
        f"samples_per_insert_error_buffer={error_buffer!r} is too small for "
        f"samples_per_insert={samples_per_insert}: Reverb requires it to be at least "
        f"max(1, samples_per_insert) = {floor}, or sampling and inserting can block "
        "each other forever. Omit it to use a safe default.",
    )


def validate_address(name: str, address: str) -> None:
    """Raises ConfigError unless `address` looks like host:port."""
    host, sep, port = address.rpartition(":")
    ok = bool(sep) and bool(host) and port.isdigit() and 0 < int(port) < 65536
    _require(
        ok,
        f"--{name}={address!r} is not a host:port address (for example localhost:8008).",
    )


def parse_env_kwargs(text: Optional[str]) -> Dict[str, Any]:
    """`--env_kwargs` as a dict; raises ConfigError unless it is a JSON object."""
    if not text:
        return {}
    example = """e.g. --env_kwargs='{"goal_radius": 0.1}'"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"--env_kwargs={text!r} is not JSON ({e.msg}): give a JSON object, {example}."
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"--env_kwargs={text!r} is a JSON {type(value).__name__}, not an object: give "
            f"keyword arguments as an object, {example}."
        )
    return value


def _require_env_name(env_name: str) -> None:
    _require(
        isinstance(env_name, str) and bool(env_name.strip()),
        "env_name must be a gym or pybullet environment id such as Pendulum-v1.",
    )


def _require_seed(seed: Optional[int]) -> None:
    _require(
        seed is None
        or (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED),
        f"seed must be an integer in [0, {MAX_SEED}] or unset, got {seed!r}.",
    )


def _require_positive_int(name: str, value: Any) -> None:
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        f"{name} must be a positive integer, got {value!r}.",
    )


def _require_positive_number(name: str, value: Any) -> None:
    _require(_is_number(value) and value > 0, f"{name} must be a number > 0, got {value!r}.")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
