"""Errors a user can fix from the message alone.

They live in this dependency-free module so that the launcher and the binaries
can recognise them without importing TensorFlow.
"""


class ConfigError(ValueError):
    """A configuration value is invalid; the message says which and what to do."""


class EnvError(ConfigError):
    """The environment name or its spaces cannot be used for SAC."""


class ServerUnreachableError(ConnectionError):
    """The Reverb server did not answer within the allowed time."""


class SignatureMismatchError(ValueError):
    """A client's data does not match the server's table signature."""


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or inf; training stopped before saving anything bad."""


class CheckpointError(RuntimeError):
    """No checkpoint in the learner's directory can be read."""


class ReplayCheckpointError(RuntimeError):
    """Replay checkpoints exist but none can be read."""


class PortInUseError(OSError):
    """Another server (Reverb or not) already listens on the requested port."""


class RunOwnedError(RuntimeError):
    """Another job holds what this one needs: the run (a learner's root_dir lock or
    the server's lease), a replay shard (its server's lock) or an actor's task index."""


class StoppedWhileWaitingError(Exception):
    """A stop signal ended a wait for a server: the job stops cleanly, not a failure."""


USER_ERRORS = (
    ConfigError,
    ServerUnreachableError,
    SignatureMismatchError,
    NonFiniteLossError,
    CheckpointError,
    PortInUseError,
    RunOwnedError,
    ReplayCheckpointError,
)
