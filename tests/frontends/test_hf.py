"""Hugging Face ``transformers`` models (random weights from small configs, nothing
downloaded): GPT-2 (tied embedding and output projection), BERT and a Llama-style model trace
with no user workaround (``use_cache=False`` is set for the user, and said), get plans whose
stages all do work at k = 2 and 4, and those plans' stages, built by the runtime, compute the
model's output and gradients (run like ``PipelineStage``). Data-dependent control flow gets one
line naming the source line and the way around it."""

import pytest

from frontends.extras import require_extra

torch = require_extra("torch", "torch")
transformers = require_extra("transformers", "test")
pytest.importorskip("torch.distributed.pipelining")

from frontends.stage_runner import check_stages
from stagecut.errors import InvalidArgumentError
from stagecut.frontends.torch import trace_torch

VOCAB = 100


def gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=16,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def bert():
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                  vocab_size=VOCAB, max_position_embeddings=16)
    return transformers.BertModel(cfg, add_pooling_layer=False)


def llama():
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                   intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=16,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg)


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama}


def traced(name, **kw):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    x = torch.randint(0, VOCAB, (2, 8))
    return model, x, trace_torch(model, (x,), bandwidth=1e9, flops_per_s=1e8, **kw)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_traces_with_no_workaround(name):
    model, x, t = traced(name)
    assert t.method == "export"
    assert model.config.use_cache is False
    assert any("use_cache set to False" in n for n in t.notes)
    if name == "gpt2":
        (tw,) = t.tied.values()
        assert set(tw.aliases) == {"transformer.wte.weight", "lm_head.weight"}
    else:
        assert not t.tied


@pytest.mark.parametrize("name", sorted(MODELS))
def test_plans_run_forward_and_backward(name):
    model, x, t = traced(name)
    for k in (2, 4):
        plan = t.partition(k)
        loads = [s.load for s in plan.stages]
        assert all(s.nodes for s in plan.stages) and min(loads) > 0.2 * max(loads), (k, loads)
    check_stages(model, x, t, t.partition(2), atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_four_stage_plans_run(name):
    model, x, t = traced(name)
    check_stages(model, x, t, t.partition(4), atol=1e-4)


class DataDependent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            return h * 2
        return h


def test_data_dependent_control_flow_is_one_line_naming_the_code():
    with pytest.raises(InvalidArgumentError) as e:
        trace_torch(DataDependent(), torch.randn(2, 4), bandwidth=1e9)
    msg = str(e.value)
    assert "\n" not in msg
    assert "data-dependent control flow" in msg and "test_hf.py" in msg and "if h.sum() > 0" in msg
    assert "aten.item (of aten.gt)" in msg  # the operator reading the value, and what it reads
    assert "torch.cond" in msg and "submodule" in msg


class ReadsAnIndex(torch.nn.Module):
    def forward(self, x):
        n = int(x.argmax())
        return x[:, :n] * 2


def test_data_dependent_size_names_the_operator_it_reads():
    with pytest.raises(InvalidArgumentError) as e:
        trace_torch(ReadsAnIndex(), torch.randn(2, 4), bandwidth=1e9)
    msg = str(e.value)
    assert "\n" not in msg and "n = int(x.argmax())" in msg and "aten.item (of aten.argmax)" in msg


def test_data_dependent_reads_the_partial_graph():
    """The message comes from the graph torch.export attaches to its error (no source line in the
    error text: the graph's ``# File`` comment gives it); other errors are not explained."""
    from stagecut.frontends.model_prep import data_dependent

    class GuardOnDataDependentSymNode(RuntimeError):
        pass

    e = GuardOnDataDependentSymNode("Could not guard on data-dependent expression u0")
    e.partial_fx_graph = (
        "def forward(self, x):\n"
        "    # File: /m.py:7 in forward, code: if x.max() > 1:\n"
        '    max_1: "f32[]" = torch.ops.aten.max.default(x);  x = None\n'
        '    gt: "b8[]" = torch.ops.aten.gt.Scalar(max_1, 1);  max_1 = None\n'
        '    ne: "b8[]" = torch.ops.aten.ne.Scalar(gt, 0);  gt = None\n'
        '    item: "Sym(u0)" = torch.ops.aten.item.default(ne);  ne = None\n')
    msg = data_dependent(e)
    assert msg is not None and "at /m.py:7 in forward (`if x.max() > 1:`)" in msg and "aten.item (of aten.gt)" in msg
    assert data_dependent(RuntimeError("shape mismatch")) is None


@pytest.mark.slow  # 2 spawned processes, each tracing the three models
def test_two_rank_gloo_pipeline_runs_the_plans(tmp_path):
    """GPT-2 (tied weights replicated), BERT and Llama at k = 2 through PipelineStage and
    ScheduleGPipe on 2 gloo ranks: the loss matches the unsplit model's, and every parameter's
    gradient (copies of the tied weight summed) too."""
    from frontends.test_pipeline_runtime import check_gloo

    cases = []
    for name in sorted(MODELS):
        _, _, t = traced(name)
        plan = t.partition(2)
        stages = [list(s.nodes) for s in plan.stages]
        assert all(stages)
        cases += [(f"hf:{name}", stages, False), (f"hf:{name}", stages, True)]
    check_gloo(cases, tmp_path)


def test_pipeline_of_a_model_not_traced_here_sets_use_cache():
    """Every rank builds its pipe; the rank that loads a saved plan has not traced its model."""
    from stagecut.frontends import runtime

    _, x, t = traced("gpt2")
    torch.manual_seed(0)
    fresh = gpt2().eval()
    assert fresh.config.use_cache is True
    pipe = runtime.pipeline(fresh, (x,), split_policy=t.split_policy(t.partition(2)))
    assert pipe.num_stages == 2 and fresh.config.use_cache is False
