"""partition_trace on a traced GPT-style stack: the contracted exact DP gives the unrestricted
optimum (forward), the "attached" family's optimum equals the unrestricted DP's (training) and
its lower bound is below it; program order and layers are optimal over their splits."""

import math

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
nn = torch.nn

import stagecut as sc  # noqa: E402
from stagecut.frontends._common import trace_with_backward  # noqa: E402
from stagecut.frontends.program_order import partition_trace  # noqa: E402
from stagecut.frontends.torch import trace_torch  # noqa: E402


class Attn(nn.Module):
    def __init__(self, d, h, t):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(t, t, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, d, h, t):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attn(d, h, t), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers=2, d=16, h=2, t=8, vocab=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(t, d)
        self.layers = nn.ModuleList([Block(d, h, t) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


@pytest.fixture(scope="module")
def gpt_trace():
    torch.manual_seed(0)
    model = GPT(layers=2).eval()
    return trace_torch(model, torch.randint(0, 32, (2, 8)), bandwidth="10GB/s", flops_per_s=1e10)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_forward_plan_is_the_unrestricted_optimum(gpt_trace, k):
    free = sc.partition(gpt_trace.graph, devices=k, method="dp", max_ideals=10**6)
    plan = partition_trace(gpt_trace, k)
    assert plan.stats["family"] == "contiguous" and plan.status == "optimal"
    assert plan.objective == pytest.approx(free.objective, rel=1e-12)
    assert plan.stats["ideals"] < free.stats["ideals"] / 3  # the contraction is what makes depth cheap
    assert sc.evaluate(gpt_trace.graph, plan.device_of(), devices=k).objective == plan.objective


@pytest.mark.parametrize("k", [2, 4])
def test_training_attached_family_equals_the_unrestricted_dp(gpt_trace, k):
    t = trace_with_backward(gpt_trace, 2.0)
    free = sc.partition(t.graph, devices=k, method="dp", max_ideals=10**6)
    plan = partition_trace(t, k, family="attached")
    assert plan.status == "optimal" and plan.stats["family"] == "attached"
    exact = partition_trace(t, k, family="contiguous")
    assert "hang=" in plan.stats["merged"] and plan.stats["ideals"] < exact.stats["ideals"]  # it restricts
    assert plan.objective == pytest.approx(free.objective, rel=1e-12)
    assert plan.lower_bound is not None and plan.lower_bound <= free.objective * (1 + 1e-12)
    assert 0 < plan.stats["restriction_cost"] < 1e-3  # the masks' compute moves with them: a small gap
    auto = partition_trace(t, k)
    assert auto.objective == pytest.approx(free.objective, rel=1e-12)


@pytest.mark.parametrize("family", ["program", "layer"])
def test_ordered_families_are_never_below_the_free_optimum(gpt_trace, family):
    free = sc.partition(gpt_trace.graph, devices=4, method="dp", max_ideals=10**6).objective
    plan = partition_trace(gpt_trace, 4, family=family)
    assert plan.objective >= free * (1 - 1e-12)
    assert plan.lower_bound <= free
    pos = {v: i for i, v in enumerate(gpt_trace.order)}
    spans = [sorted(pos[v] for v in s.nodes) for s in plan.stages]
    assert all(b[-1] - b[0] + 1 == len(b) for b in spans)  # runs of program order
    if family == "layer":  # every cut falls where the outermost module changes
        for s in plan.stages[1:]:
            first = gpt_trace.order[min(pos[v] for v in s.nodes)]
            before = gpt_trace.order[min(pos[v] for v in s.nodes) - 1]
            a, b = gpt_trace.modules[first], gpt_trace.modules[before]
            assert not a or not b or a[0] != b[0]
