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
images (15x15 or larger) among vector parts (a robot's camera and joint angles):
the run observes {"pixels": the image, "state": the other parts flattened into
one float32 vector, in the space's order} (`split_camera`), and the critics and
the actor read the conv encoder's features of the pixels concatenated with the
state, SB3's MultiInputPolicy's way. Several cameras of one height and width (a
front and a wrist camera) are one "pixels" array, their channels side by side in
the space's order, and each camera has its own encoder (`camera_channels` says
which channels are whose), their features concatenated; cameras of different
sizes are flattened like any other part, an MLP on raw pixels, which
`describe_parts` says plainly.
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


def camera_parts(parts: List[ObservationPart]) -> List[ObservationPart]:
    """The images of observations that train from pixels, in the space's order, else
    [] (no image; or, inside a Dict or Tuple, one too small for the encoder or
    cameras of different heights and widths: those are flattened)."""
    images = [p for p in parts if p.kind == IMAGE]
    if not images or (len(images) > 1 and not is_nested(parts)):
        return []
    if not is_nested(parts):
        return images
    sizes = {_height_width(image) for image in images}
    if len(sizes) > 1 or min(next(iter(sizes))) < SMALLEST_CAMERA:
        return []
    return images


def camera_part(parts: List[ObservationPart]) -> Optional[ObservationPart]:
    """The first image of observations that train from pixels, else None."""
    images = camera_parts(parts)
    return images[0] if images else None


def camera_channels(parts: List[ObservationPart]) -> Tuple[int, ...]:
    """The channels of each camera of a camera observation, in the order its images
    sit side by side in "pixels" (one entry per camera; () for no camera)."""
    return tuple(_channels(image) for image in camera_parts(parts))


def _channels(part: ObservationPart) -> int:
    return part.shape[0] if part.channels_first else part.shape[2]


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
    """(H, W, C) of a camera observation's "pixels" (channels last; several cameras'
    channels side by side), None for any other."""
    image = camera_part(parts)
    if image is None:
        return None
    return (*_height_width(image), sum(camera_channels(parts)))


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
        images = camera_parts(parts)
        size = state_size(parts)
        state = f"; the other parts ({size} floats) as one state vector beside its features"
        if len(images) > 1:
            names = ", ".join(image.path for image in images)
            pixels = (
                f"cameras {names} trained from pixels, side by side in one uint8 array, each "
                "through its own conv encoder (their features concatenated), the last "
                "--frame_stack frames stacked and each stored once in replay"
            )
            state = state.replace("its features", "their features")
        else:
            pixels = f"{images[0].path} {pixels}"
        return (
            f"observations ({listed}): {pixels}"
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
        elif len({_height_width(image) for image in images}) > 1:
            why = "the cameras differ in height and width; render them at one size to train "
            why += "each through its own conv encoder"
        else:
            why = f"the conv encoder takes images of {SMALLEST_CAMERA}x{SMALLEST_CAMERA} or more"

        text += (
            "; images inside a Dict or Tuple are flattened into it as raw pixels for an MLP "
            f"({why}), which learns little from pixels"
        )
    return text


def split_camera(space: Any) -> Callable[[Any], Dict[str, np.ndarray]]:
    """For a Gymnasium Dict or Tuple space with cameras: a function from its
    observations to {PIXELS: the images channels-last uint8, side by side along the
    channels in the space's order, STATE: the other parts flattened into float32, in
    the space's order}, or to the pixels alone when there are no other parts (the
    run then observes them as a one-image env)."""
    from gymnasium.spaces import utils

    parts = observation_parts(space, "")
    images = camera_parts(parts)
    if not images or not is_nested(parts):
        raise ValueError(f"{space} is not a Dict or Tuple with cameras.")
    vectors = [(p.path, _leaf(space, p.path)) for p in parts if p.kind != IMAGE]

    def frame(observation: Any, image: ObservationPart) -> np.ndarray:
        pixels = np.asarray(_leaf(observation, image.path), np.uint8)
        return np.moveaxis(pixels, 0, -1) if image.channels_first else pixels

    def split(observation: Any) -> Dict[str, np.ndarray]:
        frames = [frame(observation, image) for image in images]
        pixels = np.ascontiguousarray(frames[0] if len(frames) == 1 else np.concatenate(frames, -1))
        if not vectors:
            return pixels
        flat = [utils.flatten(leaf, _leaf(observation, path)) for path, leaf in vectors]
        return {PIXELS: pixels, STATE: np.concatenate(flat).astype(np.float32)}

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
    for name, what in _REFUSED_WITH_PIXELS.items():
        if getattr(hparams, name):
            raise ConfigError(f"{where}, which trains without {what}.")
