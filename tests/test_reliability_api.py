"""The Python API under random JSON-like values: every public entry point that reads data, and
every result class's ``from_json``, either accepts a value or raises a stagecut error (a
``ValueError`` subclass, or a ``MemoryError`` one for requests too large): never a bare
``TypeError``, ``AttributeError``, ``KeyError``, ``AssertionError`` or ``RecursionError``."""

import copy
import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stagecut as sc
from stagecut.errors import StagecutError
from stagecut.latency import Devices, Schedule
from stagecut.rwnn import rwnn

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                    st.text(max_size=8), st.sampled_from(["inf", "nan", "-inf", "optimal", "Plan", "cpu", "1e999"]))
json_like = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                         max_leaves=12)


def _saved(cls):
    """A valid saved result of ``cls`` to mutate (a fresh copy)."""
    return copy.deepcopy(_saved_once(cls))


@functools.cache
def _saved_once(cls):
    g = sc.Graph.chain([4.0, 1.0, 1.0, 2.0, 4.0])
    if cls is Schedule:
        return sc.place(g, 2, method="heft").to_json()
    if cls is sc.SlicePlan:
        return sc.slice_graph(g, devices=2, memory=1e9, method="dp").to_json()
    return sc.partition(g, devices=3).to_json()


def _clean(call, value):
    try:
        call(value)
    except StagecutError as e:
        assert isinstance(e, (ValueError, MemoryError)), type(e)


FROM_JSON = [sc.Plan, Schedule, sc.SlicePlan, sc.TrainingPlan, sc.Evaluation]


@pytest.mark.parametrize("cls", FROM_JSON, ids=lambda c: c.__name__)
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_like)
def test_from_json_of_anything_is_a_result_or_a_stagecut_error(cls, value):
    _clean(cls.from_json, value)
    _clean(cls.from_json, json.dumps(value, default=str))


@pytest.mark.parametrize("cls", [sc.Plan, Schedule, sc.SlicePlan], ids=lambda c: c.__name__)
@settings(max_examples=60)
@given(field=st.text(max_size=12), value=json_like, data=st.data())
def test_a_saved_result_with_one_field_replaced_reads_back_or_fails_cleanly(cls, field, value, data):
    saved = _saved(cls)
    key = data.draw(st.sampled_from(sorted(saved) + [field]))
    saved[key] = value
    _clean(cls.from_json, saved)
    if isinstance(saved.get("stages"), list) and saved["stages"]:
        stage = saved["stages"][0]
        if isinstance(stage, dict):
            stage[data.draw(st.sampled_from(sorted(stage) or ["nodes"]))] = value
            _clean(cls.from_json, saved)


@settings(max_examples=80)
@given(value=json_like)
def test_readers_of_dicts_accept_or_refuse_cleanly(value):
    _clean(Devices.from_dict, value)
    _clean(sc.workload_from_dict, value)
    if isinstance(value, dict):
        _clean(Devices.from_dict, {"topology": "pcie", **value})
        _clean(sc.workload_from_dict, {"nodes": [value], "edges": []})


#: small sizes (built) and absurd ones (refused before allocation); nothing in between, which would
#: build a graph of a million nodes
gen_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 40), st.integers(10**7, 10**30),
                        st.floats(-5.0, 40.0), st.just(float("nan")), st.just(float("inf")), st.text(max_size=4))


@settings(max_examples=40, deadline=None)
@given(value=gen_scalars)
def test_generators_accept_or_refuse_cleanly(value):
    _clean(lambda v: sc.regal_graph(v), value)
    _clean(lambda v: sc.regal_graph(12, tensor_std=v), value)
    _clean(lambda v: sc.regal_graph(12, seed=v), value)
    _clean(lambda v: rwnn(v, size=10), value)
    _clean(lambda v: rwnn(2, channels=v), value)
    _clean(lambda v: rwnn(2, size=v), value)
    _clean(lambda v: Devices.pcie_star(v), value)


def test_the_deepest_json_is_a_stagecut_error():
    with pytest.raises(StagecutError):
        sc.Plan.from_json("[" * 100000 + "]" * 100000)
