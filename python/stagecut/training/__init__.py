"""Piper: training plans with pipeline x data x tensor parallelism (Tarnawski et al., NeurIPS 2021)."""

from stagecut.training.piper import (
    RECOMPUTE_ID,
    TMPC,
    PiperEdge,
    PiperNode,
    PiperProblem,
    PiperStage,
    TrainingEvaluation,
    TrainingPlan,
    chain_problem,
    evaluate_training,
    insert_layer_copies,
    piper_from_dict,
    plan_baselines,
    plan_equi,
    plan_training,
    read_piper,
)

__all__ = [
    "RECOMPUTE_ID", "TMPC", "PiperEdge", "PiperNode", "PiperProblem", "PiperStage", "TrainingEvaluation", "TrainingPlan",
    "chain_problem", "evaluate_training", "insert_layer_copies", "piper_from_dict", "plan_baselines",
    "plan_equi", "plan_training", "read_piper",
]
