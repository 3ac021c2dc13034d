"""skrl's DDPG agent (Warp backend) learning gymnasium's Pendulum-v1 on the CPU for 60 gradient steps.

Third-party code audited: skrl 2.1.1 (MIT, https://github.com/Toni-SM/skrl, ``skrl/agents/warp/ddpg/ddpg.py``: per
gradient step a critic tape (targets from the target policy and target critic, outside the tape) and a policy tape
through the critic, each ``tape.backward`` followed by warp-nn's Adam and ``tape.zero()``; Ornstein-Uhlenbeck
exploration noise; polyak updates of both target networks), warp-nn 0.4.1 (Apache-2.0) and gymnasium 1.4.0 (MIT),
installed from PyPI (tests/test_thirdparty.py says how), not copied here.

This driver is ours, written against skrl's public API after skrl's ``examples/gymnasium/warp_gymnasium_pendulum_ddpg
.py``; what differs from that example, so that it runs headless on a CPU in seconds: the device is the CPU; the seed
is fixed; 32 hidden units instead of 400/300; batch 32 instead of 100; 40 random timesteps and learning starts
after 40 instead of 100; 100 timesteps instead of 15000 (60 gradient steps, 120 backwards); memory 1000 instead of
15000; no TensorBoard events, checkpoints or progress bar; it prints the trained parameters' sums.
"""

from _skrl_common import mlp, pendulum, report, setup_cpu, train
from skrl.agents.warp.ddpg import DDPG, DDPG_CFG
from skrl.memories.warp import RandomMemory
from skrl.models.warp import DeterministicMixin, Model
from skrl.resources.noises.warp import OrnsteinUhlenbeckNoise
from skrl.utils.framework.warp import concatenate, scalar_mul

setup_cpu()  # before any skrl object reads its device (cuda:0 by default where there is one)

TIMESTEPS = 100


class Actor(DeterministicMixin, Model):
    def __init__(self, observation_space, state_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, state_space=state_space, action_space=action_space, device=device
        )
        DeterministicMixin.__init__(self)
        self.net = mlp(self.num_observations, self.num_actions, squash=True)
        self.__post_init__()

    def compute(self, inputs, role):
        return scalar_mul(self.net(inputs["observations"]), 2.0), {}


class Critic(DeterministicMixin, Model):
    def __init__(self, observation_space, state_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, state_space=state_space, action_space=action_space, device=device
        )
        DeterministicMixin.__init__(self)
        self.net = mlp(self.num_observations + self.num_actions, 1)
        self.__post_init__()

    def compute(self, inputs, role):
        return self.net(concatenate([inputs["observations"], inputs["taken_actions"]], axis=1)), {}


env = pendulum()
device = env.device
spaces = (env.observation_space, env.state_space, env.action_space, device)
models = {
    "policy": Actor(*spaces),
    "target_policy": Actor(*spaces),
    "critic": Critic(*spaces),
    "target_critic": Critic(*spaces),
}

cfg = DDPG_CFG()
cfg.exploration_noise = OrnsteinUhlenbeckNoise
cfg.exploration_noise_kwargs = {"theta": 0.15, "sigma": 0.1, "base_scale": 1.0, "device": device}
cfg.exploration_scheduler = lambda timestep, timesteps: max(1 - timestep / timesteps, 1e-2)
cfg.batch_size = 32
cfg.random_timesteps = 40
cfg.learning_starts = 40
cfg.experiment.write_interval = 0
cfg.experiment.checkpoint_interval = 0

agent = DDPG(
    models=models,
    memory=RandomMemory(memory_size=1000, num_envs=env.num_envs, device=device, replacement=False),
    cfg=cfg,
    observation_space=env.observation_space,
    state_space=env.state_space,
    action_space=env.action_space,
    device=device,
)
train(agent, env, timesteps=TIMESTEPS)
report("ddpg", models)
