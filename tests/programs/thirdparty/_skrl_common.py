"""What the three skrl drivers share: the CPU setup, gymnasium's Pendulum-v1 wrapped for skrl's Warp backend, the
two small networks (written against skrl's and warp-nn's public API, as skrl's own Pendulum examples build them)
and the trainer run that prints a deterministic summary.

Why the summary: the drivers run twice in tests/test_thirdparty.py, under ``python`` and under ``gradcheck exec``,
and their stdout must match; the sums of the trained parameters after a seeded run change if anything gradcheck does
perturbs a gradient, an optimizer state or the random stream. The progress bar is off because tqdm writes its rates
to stdout.
"""

from __future__ import annotations

import numpy as np
import warp as wp

SEED = 42


def setup_cpu():
    """Warp and skrl on the CPU whatever the machine has (skrl's default device is cuda:0 when there is one)."""
    from skrl import config
    from skrl.utils import set_seed

    wp.init()
    wp.set_device("cpu")
    config.warp.device = "cpu"
    set_seed(SEED)


def pendulum(num_envs: int = 1):
    """Pendulum-v1, one environment or ``num_envs`` stepped in turn by gymnasium's synchronous vector wrapper."""
    import gymnasium as gym
    from skrl.envs.wrappers.warp import wrap_env

    if num_envs == 1:
        env = gym.make("Pendulum-v1")
    else:
        env = gym.make_vec("Pendulum-v1", num_envs=num_envs, vectorization_mode="sync")
    env.reset(seed=SEED)
    env.action_space.seed(SEED)
    return wrap_env(env)


def mlp(inputs: int, outputs: int, hidden: int = 32, squash: bool = False):
    import warp_nn.nn as nn

    layers = [nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs)]
    if squash:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def train(agent, env, timesteps: int) -> None:
    from skrl.trainers.warp import SequentialTrainer

    trainer = SequentialTrainer(
        cfg={"timesteps": timesteps, "headless": True, "disable_progressbar": True}, env=env, agents=agent
    )
    trainer.train()


def report(name: str, models: dict) -> None:
    """One line per model: how many parameters and their sum and absolute sum after training (6 significant digits:
    the same seeded run gives the same float32 values, bit for bit, on the same machine)."""
    for role, model in sorted(models.items()):
        values = [np.asarray(p.numpy(), dtype=np.float64).ravel() for p in model.parameters()]
        flat = np.concatenate(values) if values else np.zeros(0)
        print(f"{name} {role}: {flat.size} parameters, sum {flat.sum():.6g}, |sum| {np.abs(flat).sum():.6g}")
