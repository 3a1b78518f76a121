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


class Twice(nn.Module):
    """``fc`` is called twice (its weight read by two operators of one module); ``out`` once."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(torch.relu(self.fc(x)))))


def manual_plan(trace, stages):
    """A Plan with the given node lists as stages, in pipeline order, scored by the evaluator."""
    ev = sc.evaluate(trace.graph, {v: ("accelerator", i) for i, s in enumerate(stages) for v in s},
                     devices=len(stages))
    loads = [DeviceLoad(index=i, device=f"accelerator:{i}", nodes=tuple(s), load=0.0, kind="accelerator",
                        kind_index=i) for i, s in enumerate(stages)]
    return Plan(objective=ev.objective, status="feasible", method="manual", stages=tuple(loads), devices=len(stages),
                cpus=0, memory=float("inf"))


class Transposed(nn.Module):
    """A cut after ``transpose`` sends a non-contiguous tensor; ``relu_`` writes in place to what
    the previous node made (a received leaf when a stage starts there)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x).transpose(1, 2)
        h = torch.relu_(h * 1.0)
        return self.b(h).sum(-1)


class InplaceCNN(nn.Module):
    """ResNet-style: BatchNorm (train mode updates its buffers in place), ``ReLU(inplace=True)``,
    a residual add in place, flatten glue."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        h = self.act(self.bn(self.stem(x)))
        h = self.conv(h).add_(h)
        return self.head(torch.flatten(torch.relu_(h), 1))


class TinyEncoder(nn.Module):
    """Three encoder layers with attention (transposes, views): the transformer of the tests."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(16, 32)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
                                     for _ in range(3)])
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(1))


class TiedLM(nn.Module):
    """A GPT-like stack: the output projection ties the token embedding's weight; a buffer
    (a mask) is sliced in every layer."""

    def __init__(self, vocab=50, d=16, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                     for _ in range(layers)])
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("mask", torch.ones(8, 8))

    def forward(self, idx):
        h = self.emb(idx)
        for layer in self.layers:
            h = h + layer(h) * self.mask[: idx.shape[1], :1].sum()
        return self.head(h)


def tied_lm_input(shape):
    return torch.randint(0, 50, shape)


def small_mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


# name -> (factory, micro-batch input shape, train mode)
SMALL_MODELS = {
    "mlp": (small_mlp, (2, 8), False),
    "branches": (Branches, (2, 8), False),
    "transposed": (Transposed, (2, 4, 8), False),
    "inplace_cnn": (InplaceCNN, (2, 3, 4, 4), True),
    "encoder": (TinyEncoder, (2, 5, 16), False),
    "tied_lm": (TiedLM, (2, 8), False),
}


def small_model(name, seed=0):
    """A small test model (seeded weights) and one micro-batch of inputs for it."""
    factory, shape, train = SMALL_MODELS[name]
    torch.manual_seed(seed)
    model = factory().train(train)
    return model, (tied_lm_input(shape) if factory is TiedLM else torch.randn(*shape))
