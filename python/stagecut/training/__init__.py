"""Piper: training plans with pipeline, data and tensor parallelism and activation recomputation.

The model is the one of "Piper: Multidimensional Planner for DNN Parallelization" (Tarnawski,
Narayanan, Phanishayee, NeurIPS 2021), with the exact cost model of the authors' code
(``msr-fiddle/piper``, ``algo.cpp``). A plan splits the layer DAG into a sequence of contiguous
stages; stage ``i`` gets a data-parallel degree ``d`` (dividing the number ``N`` of microbatches
in a batch), a tensor-parallel degree ``t`` and one TMPC per node, and runs on ``t * d`` devices.
Its time per sample is::

    TPS = compute / d + (edges / d + 4 (d - 1) / d * params / N) / B

with ``compute`` the chosen TMPCs' ``time``, ``edges`` the sum of ``2 (c(u, v) + sync)`` over
the edges crossing the stage boundary (the sync part from the TMPC of the endpoint inside the
stage), ``params`` the TMPCs' parameter bytes and ``B`` the bandwidth. Memory per device is
``sum(a) * ceil(s / d) + sum(b)`` where ``s`` sums the data-parallel degrees of this and the later
stages. The plan's TPS is the largest stage TPS; constraints: ``sum(t d) <= K``,
``sum(d) <= N`` (``== N`` with ``exact_batch``), and memory ``<= M``.

Modules: :mod:`~stagecut.training.model` (the problem), :mod:`~stagecut.training.io` (readers,
chains, BERT-64's layer copies), :mod:`~stagecut.training.evaluate` (the evaluator),
:mod:`~stagecut.training.solve` (Piper's DP), :mod:`~stagecut.training.baselines` (equi and the
ablations), :mod:`~stagecut.training.plan` (the result types).

Examples
--------
>>> from stagecut import training as sp
>>> prob = sp.chain_problem([3.0, 1.0, 2.0], devices=2, memory=1e9, bandwidth=1.0, batch=2, params=1.0)
>>> plan = sp.plan_training(prob, bandwidth=2.0)
>>> plan.objective, [st.nodes for st in plan.stages]
(3.0, [(0,), (1, 2)])
>>> sp.evaluate_training(prob, plan).tps == plan.objective    # with the plan's settings
True
"""

from stagecut.training.baselines import plan_baselines, plan_equi
from stagecut.training.evaluate import StageCost, StageSpec, TrainingEvaluation, evaluate_training, stage_cost
from stagecut.training.io import chain_problem, insert_layer_copies, piper_from_dict, read_piper
from stagecut.training.model import (
    RECOMPUTE_ID,
    TMPC,
    VANILLA_ID,
    PiperEdge,
    PiperNode,
    PiperProblem,
    apply_settings,
)
from stagecut.training.plan import PiperStage, TrainingPlan
from stagecut.training.solve import KNAPSACKS, plan_training

__all__ = [
    "KNAPSACKS", "RECOMPUTE_ID", "VANILLA_ID", "TMPC", "PiperEdge", "PiperNode", "PiperProblem", "PiperStage",
    "StageCost", "StageSpec", "TrainingEvaluation", "TrainingPlan", "apply_settings", "chain_problem",
    "evaluate_training", "insert_layer_copies", "piper_from_dict", "plan_baselines", "plan_equi", "plan_training",
    "read_piper", "stage_cost",
]
