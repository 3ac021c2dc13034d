"""skrl's PPO agent (Warp backend) learning gymnasium's Pendulum-v1 on the CPU for 3 short updates.

Third-party code audited: skrl 2.1.1 (MIT, https://github.com/Toni-SM/skrl, ``skrl/agents/warp/ppo/ppo.py``: one
``wp.Tape`` per mini-batch over the policy and value networks and three loss kernels, ``tape.backward(loss)``,
gradient-norm clipping and Adam inside ``optimizer.step``, ``tape.zero()``), warp-nn 0.4.1 (Apache-2.0, NVIDIA's
neural-network layers and optimizers for Warp, whose kernels' adjoints the tape replays) and gymnasium 1.4.0 (MIT,
the environment). They are installed from PyPI (tests/test_thirdparty.py says how), not copied here.

This driver is ours, written against skrl's public API after skrl's ``examples/gymnasium/warp_gymnasium_pendulum_ppo
.py``; what differs from that example, so that it runs headless on a CPU in seconds: the device is the CPU; the seed
is fixed; the networks have 32 hidden units instead of 64; rollouts 256 instead of 1024, 4 learning epochs of 4
mini-batches instead of 10 of 32 (16 backwards per update); 768 timesteps instead of 100000 (3 updates); no
TensorBoard events, checkpoints or progress bar; it prints the trained parameters' sums. Two options select the
example's other paths: ``--num-envs N`` (gymnasium's synchronous vector environment, as the example's
``--num_envs``), ``--entropy-scale S`` (the example has 0, which leaves skrl's entropy-loss kernel off the tape) and
``--kl-threshold K`` (the example has 0; above 0, a mini-batch whose KL divergence exceeds K ends the epoch after its
tape was recorded and before its backward).
"""

import argparse

import warp as wp
import warp_nn.nn as nn
from _skrl_common import mlp, pendulum, report, setup_cpu, train
from skrl.agents.warp.ppo import PPO, PPO_CFG
from skrl.memories.warp import RandomMemory
from skrl.models.warp import DeterministicMixin, GaussianMixin, Model
from skrl.resources.preprocessors.warp import RunningStandardScaler
from skrl.resources.schedulers.warp import KLAdaptiveLR
from skrl.utils.framework.warp import scalar_mul

setup_cpu()  # before any skrl object reads its device (cuda:0 by default where there is one)

ROLLOUTS = 256

parser = argparse.ArgumentParser()
parser.add_argument("--num-envs", type=int, default=1)
parser.add_argument("--entropy-scale", type=float, default=0.0)
parser.add_argument("--kl-threshold", type=float, default=0.0)
args = parser.parse_args()


class Policy(GaussianMixin, Model):
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
        # Pendulum's torque is in [-2, 2]
        return scalar_mul(self.net(inputs["observations"]), 2.0), {"log_std": self.log_std_parameter.data}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, state_space, action_space, device):
        Model.__init__(
            self, observation_space=observation_space, state_space=state_space, action_space=action_space, device=device
        )
        DeterministicMixin.__init__(self)
        self.net = mlp(self.num_observations, 1)
        self.__post_init__()

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {}


env = pendulum(args.num_envs)
device = env.device
models = {
    "policy": Policy(env.observation_space, env.state_space, env.action_space, device),
    "value": Value(env.observation_space, env.state_space, env.action_space, device),
}

cfg = PPO_CFG()
cfg.rollouts = ROLLOUTS
cfg.learning_epochs = 4
cfg.mini_batches = 4
cfg.discount_factor = 0.9
cfg.gae_lambda = 0.95
cfg.learning_rate = 1e-3
cfg.learning_rate_scheduler = KLAdaptiveLR
cfg.learning_rate_scheduler_kwargs = {"kl_threshold": 0.008}
cfg.grad_norm_clip = 0.5
cfg.ratio_clip = 0.2
cfg.value_clip = 0.2
cfg.entropy_loss_scale = args.entropy_scale
cfg.value_loss_scale = 0.5
cfg.kl_threshold = args.kl_threshold
cfg.observation_preprocessor = RunningStandardScaler
cfg.observation_preprocessor_kwargs = {"size": env.observation_space, "device": device}
cfg.value_preprocessor = RunningStandardScaler
cfg.value_preprocessor_kwargs = {"size": 1, "device": device}
cfg.experiment.write_interval = 0
cfg.experiment.checkpoint_interval = 0

agent = PPO(
    models=models,
    memory=RandomMemory(memory_size=ROLLOUTS, num_envs=env.num_envs, device=device),
    cfg=cfg,
    observation_space=env.observation_space,
    state_space=env.state_space,
    action_space=env.action_space,
    device=device,
)
train(agent, env, timesteps=3 * ROLLOUTS)
report("ppo", models)
