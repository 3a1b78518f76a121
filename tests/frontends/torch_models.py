"""Models and plans shared by the torch front-end tests (torch required: the test extra's)."""

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc  # noqa: E402
from stagecut.results import DeviceLoad, Plan  # noqa: E402


class Branches(nn.Module):
    """Two independent branches: program order runs ``a`` before ``b``."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(torch.relu(self.a(x)) + torch.relu(self.b(x)))


def manual_plan(trace, stages):
    """A Plan with the given node lists as stages, in pipeline order, scored by the evaluator."""
    ev = sc.evaluate(trace.graph, {v: ("accelerator", i) for i, s in enumerate(stages) for v in s},
                     devices=len(stages))
    loads = [DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(s), load=0.0, kind="accelerator",
                        kind_index=i) for i, s in enumerate(stages)]
    return Plan(objective=ev.objective, status="feasible", method="manual", stages=tuple(loads), devices=len(stages),
                cpus=0, memory=float("inf"))
