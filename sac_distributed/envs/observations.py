"""What an env observes: the parts of its observation space, and the one flat
float32 vector that SAC's networks here take.

An observation space is read part by part (no TensorFlow, so the launcher can
check an env before any process starts):

- a Box is a vector part (any rank; it is flattened), or an image part when it
  is uint8 of rank 3: (H, W, C) channels-last, or (C, H, W) channels-first when
  the first dimension is the smallest, the rule SB3 uses;
- Discrete, MultiDiscrete and MultiBinary are one-hot or 0/1 vectors;
- a Dict or Tuple of any of these (nested too) is its parts in the space's own
  order (Gymnasium's Dict sorts its keys), each flattened and concatenated, as
  `gymnasium.spaces.utils.flatten` does and as SB3's MultiInputPolicy does for
  vector parts.

Text, Sequence, Graph and OneOf observations have no fixed-size vector and are
refused in one line that names the part. An observation that is one image
trains from pixels (pixels.py). So does a Dict or Tuple of Gymnasium spaces with
exactly one image (15x15 or larger) among vector parts (a robot's camera and
joint angles): the
run observes {"pixels": the image, "state": the other parts flattened into one
float32 vector, in the space's order} (`split_camera`), and the critics and the
actor read the conv encoder's features of the pixels concatenated with the
state, SB3's MultiInputPolicy's way. Two or more images in one observation are
flattened like any other part, an MLP on raw pixels, which `describe_parts` says
plainly.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from sac_distributed.errors import ConfigError, EnvError

VECTOR = "vector"
IMAGE = "image"
# The smallest height and width the conv encoder takes: pixel_policy.min_image_size(),
# which a test holds this to (envs/ does not import the algorithm).
SMALLEST_CAMERA = 15
# The keys of a camera-and-state observation inside a run (and of its exports).
PIXELS = "pixels"
STATE = "state"
# Spaces whose samples have no fixed size (or no numbers): refused.
_NO_FIXED_VECTOR = ("Text", "Sequence", "Graph", "OneOf")
_ONE_HOT = ("Discrete", "MultiDiscrete", "MultiBinary")


@dataclasses.dataclass(frozen=True)
class ObservationPart:
    """One leaf of an observation space."""

    path: str  # "" for a space that is one leaf; "camera", "arm/joints", "0" otherwise
    kind: str  # VECTOR or IMAGE
    space: str  # the space's class name: Box, Discrete, ...
    shape: Tuple[int, ...]  # the leaf's sample shape as the env gives it
    dtype: str
    channels_first: bool = False  # images only
    size: int = 0  # floats this part adds to the flat observation

    def describe(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        if self.kind == IMAGE:
            order = "channels-first" if self.channels_first else "channels-last"
            what = f"image {dims} {self.dtype} ({order})"
        elif self.space in _ONE_HOT:
            what = f"{self.space} as {self.size} one-hot floats"
        else:
            what = f"{self.dtype}[{dims}]"
        return f"{self.path}: {what}" if self.path else what


def observation_parts(space: Any, env_name: str) -> List[ObservationPart]:
    """The leaves of a Gymnasium (or gym) observation space, in flattening order.

    Raises EnvError naming the first part that has no fixed-size vector.
    """
    parts: List[ObservationPart] = []
    _collect(space, "", env_name, parts)
    if not parts:
        raise EnvError(f"{env_name} has an empty observation space ({space}): nothing to learn.")
    return parts


def is_flat_box(space: Any) -> bool:
    """True for a Box observation, which is taken as it is (the common case)."""
    return type(space).__name__ == "Box"


def is_one_vector(parts: List[ObservationPart]) -> bool:
    """True for one Box vector: observations a run takes as they are (nothing to say)."""
    return len(parts) == 1 and parts[0].kind == VECTOR and parts[0].space == "Box"


def camera_part(parts: List[ObservationPart]) -> Optional[ObservationPart]:
    """The one image of observations that train from pixels, else None (no image,
    several, or one inside a Dict or Tuple too small for the encoder: those are
    flattened, as before cameras in a Dict trained from pixels)."""
    images = [p for p in parts if p.kind == IMAGE]
    if len(images) != 1:
        return None
    if is_nested(parts) and min(_height_width(images[0])) < SMALLEST_CAMERA:
        return None
    return images[0]


def _height_width(part: ObservationPart) -> Tuple[int, int]:
    shape = part.shape
    return (shape[1], shape[2]) if part.channels_first else (shape[0], shape[1])


def is_camera(parts: List[ObservationPart]) -> bool:
    """True for observations that train from pixels (envs/pixels.py): one uint8 image,
    alone or in a Dict or Tuple beside vector parts."""
    return camera_part(parts) is not None


def is_nested(parts: List[ObservationPart]) -> bool:
    """True for the parts of a Dict or Tuple (each leaf has a path)."""
    return bool(parts) and bool(parts[0].path)


def camera_shape(parts: List[ObservationPart]) -> Optional[Tuple[int, ...]]:
    """(H, W, C) of a camera observation's image (channels moved last), None for any other."""
    image = camera_part(parts)
    if image is None:
        return None
    shape = image.shape
    return (shape[1], shape[2], shape[0]) if image.channels_first else tuple(shape)


def state_size(parts: List[ObservationPart]) -> int:
    """Floats in a camera observation's state: every part but the image."""
    return sum(p.size for p in parts if p.kind != IMAGE)


def describe_parts(parts: List[ObservationPart], camera: bool = True) -> str:
    """One line: what the env observes and how a run takes it in (`camera=False`: an
    env whose loader flattens every part, gym's pre-Gymnasium API)."""
    listed = ", ".join(p.describe() for p in parts)
    pixels = (
        "trained from pixels, the last --frame_stack frames stacked, each stored once in "
        "replay, through a conv encoder that the critics train and the actor shares"
    )
    if camera and is_camera(parts) and not is_nested(parts):
        return f"observations {listed}: {pixels}"
    if camera and is_camera(parts):
        image = camera_part(parts)
        size = state_size(parts)
        state = f"; the other parts ({size} floats) as one state vector beside its features"
        return (
            f"observations ({listed}): {image.path} {pixels}"
            + (state if size else "")
            + f" (the run observes {{{PIXELS!r}, {STATE!r}}})"
        )
    total = sum(p.size for p in parts)
    text = f"observations {listed}" if len(parts) == 1 else f"observations ({listed})"
    text += f": one flat vector of {total} floats"
    images = [p for p in parts if p.kind == IMAGE]
    if images:
        if not camera:
            why = (
                "gym's pre-Gymnasium API flattens nested observations; make the env a "
                "Gymnasium one to train its camera through the conv encoder"
            )
        elif len(images) > 1:
            why = "the conv encoder takes one camera per observation"
        else:
            why = f"the conv encoder takes images of {SMALLEST_CAMERA}x{SMALLEST_CAMERA} or more"

        text += (
            "; images inside a Dict or Tuple are flattened into it as raw pixels for an MLP "
            f"({why}), which learns little from pixels"
        )
    return text


def split_camera(space: Any) -> Callable[[Any], Dict[str, np.ndarray]]:
    """For a Gymnasium Dict or Tuple space with one image: a function from its
    observations to {PIXELS: the image channels-last uint8, STATE: the other parts
    flattened into float32, in the space's order}, or to the image alone when there
    are no other parts (the run then observes it as a one-image env)."""
    from gymnasium.spaces import utils

    parts = observation_parts(space, "")
    image = camera_part(parts)
    if image is None or not is_nested(parts):
        raise ValueError(f"{space} is not a Dict or Tuple with one image.")
    vectors = [(p.path, _leaf(space, p.path)) for p in parts if p.kind != IMAGE]

    def split(observation: Any) -> Dict[str, np.ndarray]:
        frame = np.asarray(_leaf(observation, image.path), np.uint8)
        if image.channels_first:
            frame = np.ascontiguousarray(np.moveaxis(frame, 0, -1))
        if not vectors:
            return frame
        flat = [utils.flatten(leaf, _leaf(observation, path)) for path, leaf in vectors]
        return {PIXELS: frame, STATE: np.concatenate(flat).astype(np.float32)}

    return split


def _leaf(value: Any, path: str) -> Any:
    """The part of a nested Dict/Tuple space (or of its observation) at `path`."""
    for key in path.split("/"):
        if isinstance(value, (tuple, list)) or type(value).__name__ == "Tuple":
            value = value[int(key)]
        else:
            value = value[key]
    return value


def image_layout(shape: Tuple[int, ...], dtype: Any) -> Tuple[bool, bool]:
    """(is an image, channels first) for a Box of `shape` and `dtype`."""
    if len(shape) != 3 or np.dtype(dtype) != np.uint8:
        return False, False
    channels_first = shape[0] < min(shape[1], shape[2])
    return True, bool(channels_first)


def _collect(space: Any, path: str, env_name: str, parts: List[ObservationPart]) -> None:
    name = type(space).__name__
    if name in ("Dict", "Tuple"):
        children = space.spaces.items() if name == "Dict" else enumerate(space.spaces)
        for key, child in children:
            _collect(child, f"{path}/{key}" if path else str(key), env_name, parts)
        return
    if name == "Box":
        shape = tuple(int(d) for d in space.shape)
        image, first = image_layout(shape, space.dtype)
        parts.append(
            ObservationPart(
                path=path,
                kind=IMAGE if image else VECTOR,
                space=name,
                shape=shape,
                dtype=np.dtype(space.dtype).name,
                channels_first=first,
                size=int(np.prod(shape, dtype=np.int64)),
            )
        )
        return
    if name in _ONE_HOT:
        parts.append(
            ObservationPart(
                path=path,
                kind=VECTOR,
                space=name,
                shape=tuple(int(d) for d in (space.shape or ())),
                dtype=np.dtype(space.dtype).name,
                size=_one_hot_size(space),
            )
        )
        return
    where = f"its observation part {path!r} is" if path else "its observations are"
    if name in _NO_FIXED_VECTOR:
        raise EnvError(
            f"{env_name}: {where} a {name} space, which has no fixed-size vector of numbers "
            "for SAC's networks. Encode it as a Box (e.g. token ids padded to a fixed length) "
            "in a factory (--env_name=my_module:make_env)."
        )
    raise EnvError(
        f"{env_name}: {where} a {name} space, which sac_distributed cannot read. Give the env "
        "Box, Discrete, MultiDiscrete or MultiBinary observations (or a Dict or Tuple of them)."
    )


def _one_hot_size(space: Any) -> int:
    name = type(space).__name__
    if name == "Discrete":
        return int(space.n)
    if name == "MultiDiscrete":
        return int(np.sum(space.nvec))
    return int(np.prod(space.shape, dtype=np.int64))  # MultiBinary: one 0/1 per element


# Options a camera run cannot take, each with what to do instead.
_REFUSED_WITH_PIXELS = {
    "prioritized_replay": "prioritized replay; drop --prioritized_replay",
    "normalize_observations": "observation normalization (the encoder scales pixels to "
    "[0, 1]); drop --normalize_observations",
    "policy_averaging_tau": "policy averaging; drop --policy_averaging_tau",
}


def check_camera_options(hparams: Any, env_name: str) -> None:
    """Refuses, in one line, an option the camera path does not follow."""
    where = f"{env_name} has camera observations"
    if hparams.algorithm != "sac":
        raise ConfigError(
            f"{where}, which only --algorithm=sac trains (with a conv encoder); "
            f"--algorithm={hparams.algorithm} has none."
        )
    if hparams.n_step > 1:
        raise ConfigError(
            f"{where}: its replay stores frames for 1-step transitions only; "
            f"use --n_step=1 (got {hparams.n_step})."
        )
    for name, what in _REFUSED_WITH_PIXELS.items():
        if getattr(hparams, name):
            raise ConfigError(f"{where}, which trains without {what}.")
