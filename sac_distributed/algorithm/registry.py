"""Which algorithm `--algorithm` names: one `Algorithm` entry per name.

An entry carries everything outside its folder that depends on the choice:
the learner's factory, the option checks, how a preset is adjusted when the
algorithm is picked, which strategies it trains under and its checkpoint key.
`Hyperparams`, `hyperparams_for` and `LearnerConfig` ask the registry, and the
learner job builds its learner through `make_learner`, so a new algorithm is
a folder beside sac/ and crossq/ plus one line in BUILT_IN, with no edit to
config/, the presets or the checkpoint checks.

An algorithm defined outside the package (a test's, a user's) is registered
with the environment variable SAC_ALGORITHMS: comma-separated `module:attr`
entry points, each naming an `Algorithm`. Every process of a run reads it
(the launchers start their jobs with the launcher's environment), so the
server, actors, learner and evaluator all accept the name; the module must be
importable there (on PYTHONPATH). `register` adds one in this process alone.

This module and each folder's config.py import no TensorFlow: the launcher and
the flag definitions consult them. The learner's module is imported only when
a learner is built.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from sac_distributed.errors import ConfigError

if TYPE_CHECKING:  # the config package checks options through this module
    from sac_distributed.config import Hyperparams

# The algorithms of this package, as `module:attr` of their entries (imported on
# first use, so that their config modules may import this one).
BUILT_IN = (
    "sac_distributed.algorithm.sac.config:ALGORITHM",
    "sac_distributed.algorithm.crossq.config:ALGORITHM",
)
# More entries, `module:attr[,module:attr...]`, for algorithms defined elsewhere.
ALGORITHMS_ENV = "SAC_ALGORITHMS"


def _accept(_value) -> None:
    return None


def _unchanged(hparams: Hyperparams) -> Hyperparams:
    return hparams


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One learner update the learner job can run, and what the rest of a run needs
    to know of it.

    Attributes:
      name: the `--algorithm` value.
      title: the name in messages ("SAC", "CrossQ").
      learner: `module:attr` of the learner's factory, called as
        `factory(specs, hparams, strategy, root_dir, seed=, max_checkpoints_to_keep=)`
        and returning a `learner.Learner` (its module may import TensorFlow).
      checkpoint_key: the name the learner tracks its agent under in a checkpoint;
        a checkpoint holding another entry's key is refused for this algorithm.
      help: a few words for `--help`.
      check: called on every Hyperparams, whatever its algorithm; raises
        ConfigError for options this algorithm cannot follow (on its own runs)
        and for its own options given to another algorithm's run.
      adjust_preset: the preset's values for this algorithm when the flags pick
        it (its own defaults; values the flags give still win).
      check_strategy: raises ConfigError for a `--strategy` it cannot train under.
    """

    name: str
    title: str
    learner: str
    checkpoint_key: str
    help: str
    check: Callable[[Hyperparams], None] = _accept
    adjust_preset: Callable[[Hyperparams], Hyperparams] = _unchanged
    check_strategy: Callable[[str], None] = _accept

    def make_learner(
        self,
        specs,
        hparams: Hyperparams,
        strategy,
        root_dir: str,
        seed: Optional[int] = None,
        max_checkpoints_to_keep: Optional[int] = None,
    ):
        """The learner, built by the entry's factory (restores root_dir's checkpoint;
        max_checkpoints_to_keep None: the factory's default)."""
        kwargs = {"seed": seed}
        if max_checkpoints_to_keep is not None:
            kwargs["max_checkpoints_to_keep"] = max_checkpoints_to_keep
        return load_entry_point(self.learner)(specs, hparams, strategy, root_dir, **kwargs)


# Entries by name for each SAC_ALGORITHMS value met so far (built-in ones first).
_LOADED: Dict[str, Dict[str, Algorithm]] = {}
_REGISTERED: Dict[str, Algorithm] = {}  # by register(), in this process


def load_entry_point(target: str):
    """The object `module:attr` names, importing the module."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{target!r} is not a module:attr entry point.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(
            f"Cannot import {module_name} for the entry point {target!r} ({error}); "
            "put its folder on PYTHONPATH."
        ) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{module_name} has no {attr!r} (entry point {target!r}).") from None


def register(entry: Algorithm) -> Algorithm:
    """Adds `entry` in this process (processes started later see only SAC_ALGORITHMS)."""
    _add(_entries(), entry, "register()")  # refuses a name taken by another entry
    _REGISTERED[entry.name] = entry
    return entry


def entries() -> List[Algorithm]:
    """Every registered algorithm, the built-in ones first."""
    return list(_entries().values())


def names() -> List[str]:
    return list(_entries())


def find(name: str) -> Optional[Algorithm]:
    return _entries().get(name)


def get(name: str) -> Algorithm:
    """The entry for `name`; ConfigError naming the registered ones otherwise."""
    entry = find(name)
    require(
        entry is not None,
        f"algorithm must be one of {', '.join(names())}, got {name!r}.",
    )
    return entry


def check(hparams: Hyperparams) -> None:
    """The algorithm is registered, and every entry's option checks pass."""
    get(hparams.algorithm)
    for entry in entries():
        entry.check(hparams)


def make_learner(
    specs,
    hparams: Hyperparams,
    strategy,
    root_dir: str,
    seed: Optional[int] = None,
    max_checkpoints_to_keep: Optional[int] = None,
):
    """The learner `hparams.algorithm` names (a `learner.Learner`), under `strategy`;
    it has restored root_dir's newest usable checkpoint."""
    entry = get(hparams.algorithm)
    return entry.make_learner(specs, hparams, strategy, root_dir, seed, max_checkpoints_to_keep)


def require(condition: bool, message: str) -> None:
    """Raises ConfigError(message) unless `condition` (for the entries' checks)."""
    if not condition:
        raise ConfigError(message)


def _entries() -> Dict[str, Algorithm]:
    """The built-in entries, SAC_ALGORITHMS' and register()'s, by name."""
    extra = os.environ.get(ALGORITHMS_ENV, "")
    if extra not in _LOADED:
        found: Dict[str, Algorithm] = {}
        for target in BUILT_IN + tuple(t.strip() for t in extra.split(",") if t.strip()):
            entry = load_entry_point(target)
            if not isinstance(entry, Algorithm):
                raise ConfigError(f"{target} is not an Algorithm entry ({ALGORITHMS_ENV}).")
            _add(found, entry, target)
        _LOADED[extra] = found
    merged = dict(_LOADED[extra])
    for entry in _REGISTERED.values():
        _add(merged, entry, "register()")
    return merged


def _add(found: Dict[str, Algorithm], entry: Algorithm, source: str) -> None:
    known = found.get(entry.name)
    require(
        known is None or known == entry,
        f"Two algorithms are named {entry.name!r} (the second from {source}).",
    )
    found[entry.name] = entry
