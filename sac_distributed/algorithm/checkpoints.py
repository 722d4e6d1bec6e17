"""A learner's checkpoints and policy exports, for either learner (SAC or CrossQ).

`LearnerCheckpoints` restores the newest readable checkpoint in
root_dir/checkpoints, falling back past damaged files (after the learner's
compatibility checks, checkpoint_checks.py, refused none), and saves
ckpt-<train_step>. `PolicyExporter` writes full SavedModels of the three
policies under root_dir/policies. Both know nothing of the update itself.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging
from tf_agents.policies import greedy_policy, policy_saver, tf_policy

from sac_distributed import paths
from sac_distributed.algorithm.env_units import EnvUnitsPolicy
from sac_distributed.errors import CheckpointError
from sac_distributed.runtime import replace_dir

DEFAULT_CHECKPOINTS_TO_KEEP = 3
# TensorFlow's message when a readable checkpoint holds other variable shapes.
SHAPE_MISMATCH = "incompatible tensor with shape"

# A check of one checkpoint path before it is restored; raises CheckpointError to refuse it.
CheckpointCheck = Callable[[str], None]


class LearnerCheckpoints:
    """The checkpoints of one learner: restore with fallback, save, the latest.

    Args:
      checkpoint: the tf.train.Checkpoint of everything the learner trains.
      train_step: the learner's train_step variable (names each checkpoint).
      root_dir: the run's root directory (checkpoints go to its checkpoints/).
      max_to_keep: checkpoints kept on disk.
    """

    def __init__(
        self,
        checkpoint: tf.train.Checkpoint,
        train_step: tf.Variable,
        root_dir: str,
        max_to_keep: int = DEFAULT_CHECKPOINTS_TO_KEEP,
    ):
        self._train_step = train_step
        # TensorFlow ignores an unparsable index file; restore() then scans the directory.
        self._manager = tf.train.CheckpointManager(
            checkpoint,
            paths.checkpoint_dir(root_dir),
            max_to_keep=max_to_keep,
            checkpoint_name=paths.CHECKPOINT_PREFIX,
        )

    @property
    def latest(self) -> Optional[str]:
        return self._manager.latest_checkpoint

    @property
    def directory(self) -> str:
        return self._manager.directory

    def restore(self, checks: Sequence[CheckpointCheck] = ()) -> None:
        """Restores the newest readable checkpoint, falling back past damaged ones.

        Each of `checks` sees every candidate first and raises CheckpointError
        to refuse it (a setting the checkpoint's weights do not fit). Raises
        CheckpointError when checkpoints exist and none can be read, or one is
        readable but of other network sizes.
        """
        candidates = _checkpoints_newest_first(self._manager)
        if not candidates:
            logging.info("No checkpoint in %s: starting from scratch.", self.directory)
            return
        failures = []
        for path in candidates:
            for check in checks:
                check(path)
            try:
                self._manager.checkpoint.restore(path).assert_existing_objects_matched()
            except Exception as error:  # any unreadable file; an older one restores in full
                reason = str(error).splitlines()[0][:300]
                if SHAPE_MISMATCH in reason:
                    raise other_networks_error(path, reason) from None
                failures.append(f"{path}: {type(error).__name__}: {reason}")
                logging.warning(
                    "Checkpoint %s is unreadable (%s); trying an older one.", path, reason
                )
                continue
            if failures:
                logging.warning(
                    "Fell back to %s after %d unreadable checkpoint(s).", path, len(failures)
                )
            logging.info("Restored %s (train_step=%d).", path, int(self._train_step.numpy()))
            return
        raise CheckpointError(
            f"None of the checkpoints in {self.directory} could be read:\n  "
            + "\n  ".join(failures)
            + "\nMove the directory aside to start from scratch, or restore it from a backup."
        )

    def save(self) -> bool:
        """Writes ckpt-<train_step>; on failure keeps the previous one as the latest.

        TensorFlow records a checkpoint in the directory's index only after all
        its files are written, so a failed write is never what a restart loads.
        """
        step = int(self._train_step.numpy())
        if self.latest == os.path.join(self.directory, f"{paths.CHECKPOINT_PREFIX}-{step}"):
            return True
        try:
            path = self._manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            logging.error(
                "Could not write the checkpoint at train_step %d (%s). Training goes on; the "
                "latest good checkpoint is still %s. Check free space and permissions of %s.",
                step,
                str(error).splitlines()[0][:200],
                self.latest,
                self.directory,
            )
            return False
        logging.info("Saved checkpoint %s.", path)
        return True


def make_policy_savers(
    acting: tf_policy.TFPolicy, train_step: tf.Variable, env_action: Any = None
) -> Dict[str, policy_saver.PolicySaver]:
    """A PolicySaver per name in paths.POLICY_NAMES for the acting policy.

    The learners' policy and collect_policy are one stochastic policy: one
    saver serves both names, and an export writes it once and copies the
    directory. `env_action`: the env's own action spec where the jobs act on
    [-1, 1] (EnvSpecs.env_action); the exports then act in its bounds. Build under
    the learner's strategy scope.
    """
    greedy = greedy_policy.GreedyPolicy(acting)
    if env_action is not None:
        acting, greedy = EnvUnitsPolicy(acting, env_action), EnvUnitsPolicy(greedy, env_action)
    acting_saver = policy_saver.PolicySaver(acting, batch_size=None, train_step=train_step)
    savers = {
        "policy": acting_saver,
        "collect_policy": acting_saver,
        "greedy_policy": policy_saver.PolicySaver(greedy, batch_size=None, train_step=train_step),
    }
    assert tuple(savers) == paths.POLICY_NAMES
    return savers


class PolicyExporter:
    """Writes full SavedModels of a learner's policies to root_dir/policies/<name>.

    Each export writes to a temporary directory and replaces the old one, so a
    reader never sees half a SavedModel; a second export at the same
    train_step writes nothing.
    """

    def __init__(
        self,
        savers: Dict[str, policy_saver.PolicySaver],
        train_step: tf.Variable,
        root_dir: str,
    ):
        self._savers = savers
        self._train_step = train_step
        self._root_dir = root_dir
        self._last_exported_step = -1

    def export(self) -> None:
        """Writes all three policies, replacing the old ones."""
        step = int(self._train_step.numpy())
        if step == self._last_exported_step:
            return
        root = paths.policies_dir(self._root_dir)
        written: Dict[int, str] = {}  # id(saver) -> the directory it wrote in this export
        for name, saver in self._savers.items():
            tmp = os.path.join(root, f".{name}.tmp")
            if id(saver) in written:  # the same policy under another name: same files
                if os.path.exists(tmp):
                    shutil.rmtree(tmp)
                shutil.copytree(written[id(saver)], tmp)
            else:
                saver.save(tmp)
            final = paths.policy_dir(self._root_dir, name)
            replace_dir(tmp, final)
            written[id(saver)] = final
        self._last_exported_step = step
        logging.info("Exported policies at train_step %d to %s.", step, root)


def other_networks_error(path: str, reason: str) -> CheckpointError:
    """A readable checkpoint of other network sizes (without run_info.json to name them)."""
    return CheckpointError(
        f"The checkpoint {path} is readable but was written with other network sizes "
        f"({reason}). Pass the actor_fc_layer_params and critic_joint_fc_layer_params it was "
        "trained with, or use a new --root_dir for new sizes."
    )


def _checkpoints_newest_first(manager: tf.train.CheckpointManager) -> List[str]:
    """The manager's checkpoints plus any complete ckpt-N on disk, newest first.

    TensorFlow writes ckpt-N.index last, after the data files, so every
    ckpt-N.index on disk belongs to a checkpoint that was written in full.
    """
    found = set(manager.checkpoints)
    for index in glob.glob(os.path.join(manager.directory, f"{paths.CHECKPOINT_PREFIX}-*.index")):
        found.add(index[: -len(".index")])

    def step(path: str) -> int:
        suffix = path.rsplit("-", 1)[-1]
        return int(suffix) if suffix.isdigit() else -1

    return sorted(found, key=step, reverse=True)
