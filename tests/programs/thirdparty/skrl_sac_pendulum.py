"""skrl's SAC agent (Warp backend) learning gymnasium's Pendulum-v1 on the CPU for 60 gradient steps.

Third-party code audited: skrl 2.1.1 (MIT, https://github.com/Toni-SM/skrl, ``skrl/agents/warp/sac/sac.py``: per
gradient step three tapes and three backwards, the twin critics' loss against target critics evaluated outside the
tape, the policy loss through both critics (whose parameters receive gradient that no optimizer consumes and
``tape.zero()`` clears), and the learned entropy coefficient, each followed by warp-nn's Adam and ``tape.zero()``;
polyak updates of the target critics), warp-nn 0.4.1 (Apache-2.0) and gymnasium 1.4.0 (MIT), installed from PyPI
(tests/test_thirdparty.py says how), not copied here.

This driver is ours, written against skrl's public API after skrl's ``examples/gymnasium/warp_gymnasium_pendulum_sac
.py``; what differs from that example, so that it runs headless on a CPU in seconds: the device is the CPU; the seed
is fixed; 32 hidden units instead of 400/300; batch 32 instead of 100; learning starts after 40 timesteps instead
of 100; 100 timesteps instead of 15000 (60 gradient steps, 180 backwards); memory 1000 instead of 15000; no
TensorBoard events, checkpoints or progress bar; it prints the trained parameters' sums.
"""

import warp as wp
import warp_nn.nn as nn
from _skrl_common import mlp, pendulum, report, setup_cpu, train
from skrl.agents.warp.sac import SAC, SAC_CFG
from skrl.memories.warp import RandomMemory
from skrl.models.warp import DeterministicMixin, GaussianMixin, Model
from skrl.utils.framework.warp import concatenate, scalar_mul

setup_cpu()  # before any skrl object reads its device (cuda:0 by default where there is one)


class Actor(GaussianMixin, Model):
    def __init__(self, observation_space, state_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, state_space=state_space, action_space=action_space, device=device
        )
        GaussianMixin.__init__(
            self, clip_actions=False, clip_log_std=True, min_log_std=-20, max_log_std=2, reduction="sum"
        )
        self.net = mlp(self.num_observations, self.num_actions, squash=True)
        self.log_std_parameter = nn.Parameter(wp.zeros(self.num_actions))
        self.__post_init__()

    def compute(self, inputs, role):
        return scalar_mul(self.net(inputs["observations"]), 2.0), {"log_std": self.log_std_parameter.data}


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
    "critic_1": Critic(*spaces),
    "critic_2": Critic(*spaces),
    "target_critic_1": Critic(*spaces),
    "target_critic_2": Critic(*spaces),
}

cfg = SAC_CFG()
cfg.discount_factor = 0.98
cfg.batch_size = 32
cfg.random_timesteps = 0
cfg.learning_starts = 40
cfg.learn_entropy = True
cfg.experiment.write_interval = 0
cfg.experiment.checkpoint_interval = 0

agent = SAC(
    models=models,
    memory=RandomMemory(memory_size=1000, num_envs=env.num_envs, device=device, replacement=False),
    cfg=cfg,
    observation_space=env.observation_space,
    state_space=env.state_space,
    action_space=env.action_space,
    device=device,
)
train(agent, env, timesteps=100)
report("sac", models)
