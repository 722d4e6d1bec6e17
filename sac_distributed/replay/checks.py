"""Start-up checks: a job is refused unless it matches the server's tables.

Every job runs `check_server_tables` before it writes or reads anything, so a
job built for another environment, K, network size, shard count or sampler
fails at once with SignatureMismatchError naming both sides, instead of
training on something other than what it was asked for.
"""

from __future__ import annotations

from typing import Optional, Sequence

import reverb

from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.errors import SignatureMismatchError
from sac_distributed.replay.counts import table_info, table_transitions_per_item
from sac_distributed.replay.signatures import (
    MAX_PRIORITY_TABLE,
    REPLAY_TABLE,
    VARIABLE_TABLE,
    describe_signature,
    frame_n_step_of,
    signatures_match,
    transition_signature,
    variable_signature,
)
from sac_distributed.replay.tables import shard_capacity_items


def check_table_signature(client: reverb.Client, table: str, expected: object, what: str) -> None:
    """Raises SignatureMismatchError when the server's table differs from `expected`."""
    infos = client.server_info()
    if table not in infos:
        raise SignatureMismatchError(
            f"The Reverb server has no table {table!r} (it has {sorted(infos)}); "
            "it is not a sac-reverb-server, or a different version."
        )
    actual = infos[table].signature
    if not signatures_match(expected, actual):
        raise SignatureMismatchError(
            f"{what} does not match the server's table {table!r}.\n"
            f"  this process: {describe_signature(expected)}\n"
            f"  server:       {describe_signature(actual)}\n"
            "Start every job with the same --env_name and network sizes "
            "(actor_fc_layer_params) as the server."
        )


def check_server_tables(
    replay_clients,
    variables_client: reverb.Client,
    specs: EnvSpecs,
    hparams: Hyperparams,
    who: str,
    replay_addresses: Optional[Sequence[str]] = None,
) -> None:
    """Refuses a job whose env specs, transitions_per_item or actor network sizes
    differ from what the server's tables were built for, naming both values.

    `replay_clients` is one client or one per replay shard (in the order of
    `replay_addresses`); with several shards each one's capacity is checked
    too (`check_shard_capacity`). Raises SignatureMismatchError; run it before
    the job writes or reads anything.
    """
    if isinstance(replay_clients, reverb.Client):
        replay_clients = [replay_clients]
    addresses = replay_addresses or [f"shard {i}" for i in range(len(replay_clients))]
    for client, address in zip(replay_clients, addresses):
        check_table_signature(
            client,
            REPLAY_TABLE,
            transition_signature(specs),  # any K: the row layout first
            f"The {who}'s transition spec",
        )
        check_transitions_per_item(client, hparams.transitions_per_item, who)
        if specs.is_image:
            check_frame_n_step(client, specs, hparams.n_step, who)
        check_replay_sampler(client, hparams, who)
        if len(replay_clients) > 1:
            check_shard_capacity(client, address, hparams, len(replay_clients))
    check_table_signature(
        variables_client,
        VARIABLE_TABLE,
        variable_signature(specs, hparams),
        f"The {who}'s policy variable spec",
    )
    if hparams.prioritized_replay:
        check_max_priority_table(variables_client)


def check_shard_capacity(
    client: reverb.Client, address: str, hparams: Hyperparams, num_shards: int
) -> None:
    """Refuses a shard whose replay table was sized for another number of shards.

    A server started with --num_replay_shards=S holds replay_capacity_items // S
    items; a job that lists a different number of replay addresses would
    split batches and warm-up wrongly, so it is refused naming both sides.
    """
    actual = int(table_info(client, REPLAY_TABLE).max_size)
    expected = shard_capacity_items(hparams, num_shards)
    if actual == expected:
        return
    started = [
        s for s in range(1, 65) if shard_capacity_items(hparams, s) == actual
    ]  # the shard counts that explain the server's size, for the message
    guess = f", as started with --num_replay_shards={started[0]}" if started else ""
    raise SignatureMismatchError(
        f"The replay server at {address} holds {actual} items per shard{guess}; this job "
        f"lists {num_shards} replay addresses, so with --replay_buffer_capacity="
        f"{hparams.replay_buffer_capacity} each shard should hold {expected}. Start every "
        "shard with --num_replay_shards equal to the number of addresses in "
        "--replay_buffer_server_address, and the same --replay_buffer_capacity."
    )


def check_transitions_per_item(client: reverb.Client, expected: int, who: str) -> int:
    """K of the server's replay table; SignatureMismatchError unless it is `expected`.

    K shapes everything a job does with the replay (items written, items
    sampled per batch, items to wait for, env steps counted), so a job whose
    K differs from the table's is refused, in one line naming both values.
    """
    table_k = table_transitions_per_item(client)
    if expected != table_k:
        raise SignatureMismatchError(
            f"The {who} runs with transitions_per_item={expected}, but the server's replay "
            f"table {REPLAY_TABLE!r} stores {table_k} transitions per item: start every job "
            f"with the server's --transitions_per_item={table_k}."
        )
    return table_k


def check_frame_n_step(client: reverb.Client, specs: EnvSpecs, expected: int, who: str) -> int:
    """n of a pixel replay table's items; SignatureMismatchError unless it is `expected`
    (an item's frames reach n steps ahead, so jobs of another n cannot share it)."""
    table_n = frame_n_step_of(table_info(client, REPLAY_TABLE).signature, specs)
    if expected != table_n:
        raise SignatureMismatchError(
            f"The {who} runs with n_step={expected}, but the server's replay table "
            f"{REPLAY_TABLE!r} stores {table_n}-step pixel transitions: start every job with "
            f"the server's --n_step={table_n}."
        )
    return table_n


def check_replay_sampler(client: reverb.Client, hparams: Hyperparams, who: str) -> None:
    """Refuses a job whose prioritized_replay setting differs from the server's table.

    A learner computing importance weights for a uniform table (or an actor
    publishing priorities nobody samples by) would train on something other
    than what it was asked for, silently. Raises SignatureMismatchError naming
    both sides; the server's sampler may come from a restored replay checkpoint.
    """
    options = table_info(client, REPLAY_TABLE).sampler_options
    kind = options.WhichOneof("distribution")
    server_prioritized = kind == "prioritized"
    if server_prioritized != hparams.prioritized_replay:
        server = (
            f"prioritized (priority_exponent={options.prioritized.priority_exponent:g})"
            if server_prioritized
            else f"{kind}"
        )
        raise SignatureMismatchError(
            f"The {who} runs with prioritized_replay={hparams.prioritized_replay}, but the "
            f"server's replay table {REPLAY_TABLE!r} samples {server}. Start every job with "
            f"the server's setting (--prioritized_replay={str(server_prioritized).lower()}); a "
            "server restored from a replay checkpoint keeps the sampler it was written with, "
            "so changing the setting needs a new root_dir or --replay_start_empty."
        )
    exponent = options.prioritized.priority_exponent
    if server_prioritized and abs(exponent - hparams.priority_exponent) > 1e-6:
        raise SignatureMismatchError(
            f"The {who} runs with priority_exponent={hparams.priority_exponent:g}, but the "
            f"server's replay table {REPLAY_TABLE!r} samples with priority_exponent="
            f"{exponent:g}: start every job with --priority_exponent={exponent:g}."
        )


def check_max_priority_table(client: reverb.Client) -> None:
    """Refuses a prioritized job on a variable server without the max-priority table."""
    infos = client.server_info()
    if MAX_PRIORITY_TABLE not in infos:
        raise SignatureMismatchError(
            f"Prioritized replay needs the table {MAX_PRIORITY_TABLE!r} beside the variable "
            f"container, and the server has only {sorted(infos)}: it runs an older "
            "sac-reverb-server. Restart it with this version."
        )
