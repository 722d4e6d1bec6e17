"""n-step returns with camera observations, on a real Reverb server: each frame is
still stored once; a sampled transition's s' is the stack n steps on, its reward and
discount the n-step ones; a terminated episode's last transitions come back over the
steps they had, a time-limited episode's are dropped (DrQ-v2's replay); a job of
another n is refused in one line."""

import os

import numpy as np
import pytest
import reverb
from support.camera import pixel_hparams, pixel_server, rollout
from support.training import wait_for_size

from sac_distributed import replay
from sac_distributed.envs import loader, observations
from sac_distributed.errors import SignatureMismatchError
from sac_distributed.replay.nstep import n_step_return

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
N = 3
GAMMA = 0.9


@pytest.fixture(scope="module")
def camera():
    env = loader.load_env(
        "pointmass:make_env",
        0,
        {"pixels": True, "image_size": 16, "max_episode_steps": 7},
        module_dirs=(EXAMPLES,),
        frame_stack=3,
    )
    yield env, loader.env_specs(env)
    env.close()


def two_episodes(env):
    """Two 7-step episodes: the first cut by the time limit (discount 1), the second
    made to terminate at its last step (discount 0)."""
    steps = rollout(env, 14)
    assert steps[6][5] and steps[13][5] and steps[6][3] == 1.0
    last = steps[13]
    steps[13] = (last[0], last[1], last[2], np.float32(0.0), last[4], True)
    return steps[:7], steps[7:]


def expected(episode, terminated):
    """action -> (observation, reward, discount, next observation or None)."""
    out = {}
    for t, (observation, action, *_rest) in enumerate(episode):
        window = episode[t : t + N]
        if len(window) < N and not terminated:
            continue  # a time limit: s' would be past the episode's frames
        reward, discount = n_step_return([s[2] for s in window], [s[3] for s in window], GAMMA)
        next_observation = window[-1][4] if discount else None
        out[tuple(action)] = (observation, reward, discount, next_observation)
    return out


@pytest.mark.parametrize("k", [1, 2])
def test_n_step_pixel_transitions_come_back_as_the_env_gave_them(camera, tmp_path, k):
    env, specs = camera
    hparams = pixel_hparams(transitions_per_item=k, n_step=N, gamma=GAMMA)
    server = pixel_server(specs, hparams, tmp_path)
    client = reverb.Client(f"localhost:{server.port}")
    layout = replay.frame_layout(specs, N)
    frames = replay.transition_signature(specs, k, N)[replay.frames.FRAMES].shape[0]
    assert frames == specs.frame_stack + k + N - 1
    writer = replay.FrameWriter(client, layout, k, gamma=GAMMA)
    cut, ended = two_episodes(env)
    for episode in (cut, ended):
        for observation, action, reward, discount, next_observation, _ in episode:
            writer.write_step(0, observation, action, reward, discount, next_observation)
        writer.end_episode(0)
    want = {**expected(cut, terminated=False), **expected(ended, terminated=True)}
    assert len(want) == 5 + 7
    stored = (5 - 5 % k) + (7 - 7 % k)  # whole items of K per episode
    assert writer.flush(timeout_ms=30_000) and writer.transitions_written == stored
    assert writer.transitions_incomplete == 14 - stored
    wait_for_size(client, replay.REPLAY_TABLE, stored // k)
    dataset = replay.make_dataset(f"localhost:{server.port}", specs, batch_size=4)
    seen = set()
    for batch in dataset.take(8):
        for i in range(4):
            action = tuple(batch.action_step.action[i].numpy())
            observation, reward, discount, next_observation = want[action]
            seen.add(action)
            assert np.array_equal(batch.time_step.observation[i].numpy(), observation)
            assert float(batch.next_time_step.reward[i]) == pytest.approx(reward, rel=1e-5)
            assert float(batch.next_time_step.discount[i]) == pytest.approx(discount)
            if next_observation is not None:
                assert np.array_equal(batch.next_time_step.observation[i].numpy(), next_observation)
    assert len(seen) > stored // 2  # many distinct transitions, not one sampled again
    writer.close()
    server.stop()


def test_a_job_with_another_n_step_is_refused_in_one_line(camera, tmp_path):
    _, specs = camera
    server = pixel_server(specs, pixel_hparams(n_step=N), tmp_path)
    client = reverb.Client(f"localhost:{server.port}")
    assert replay.check_frame_n_step(client, specs, N, "actor") == N
    with pytest.raises(SignatureMismatchError, match=r"n_step=1, but .* stores 3-step") as e:
        replay.check_frame_n_step(client, specs, 1, "actor")
    assert "\n" not in str(e.value) and "--n_step=3" in str(e.value)
    server.stop()


def test_a_camera_run_takes_n_step_returns():
    observations.check_camera_options(pixel_hparams(n_step=N), "pointmass:make_env")


def test_a_multi_step_frame_writer_needs_gamma(camera):
    _, specs = camera
    with pytest.raises(ValueError, match="needs the discount gamma"):
        replay.FrameWriter(None, replay.frame_layout(specs, N), 1)
