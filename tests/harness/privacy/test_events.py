"""Typed privacy events: each refuses malformed parameters where it is built, naming the field, and
knows its own conversions; ledgers round-trip through JSON, and format-1 ledgers of real cells load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dpgym import (
    Adjacency,
    Budget,
    EventError,
    ExponentialEvent,
    GaussianEvent,
    Guarantee,
    LaplaceEvent,
    Ledger,
    NonPrivateEvent,
    PrivacyEvent,
    SubsampledGaussianEvent,
    ZcdpEvent,
)
from dpgym.privacy import gaussian_epsilon, zcdp_epsilon
from dpgym.privacy.events import EVENT_TYPES
from dpgym.privacy.reaccount import reaccount

FORMAT_1 = Path(__file__).parent / "ledger_format_1"

VALID = {
    LaplaceEvent: {"l1_sensitivity": 2.0, "scale": 4.0},
    GaussianEvent: {"l2_sensitivity": 1.0, "sigma": 3.0},
    SubsampledGaussianEvent: {"sample_rate": 0.01, "noise_multiplier": 1.1, "steps": 100, "clip_norm": 1.0},
    ExponentialEvent: {"inverse_temperature": 0.5, "utility_sensitivity": 1.0},
    ZcdpEvent: {"rho": 0.1},
    NonPrivateEvent: {},
}


def test_every_event_type_is_tested_here():
    assert set(VALID) == set(EVENT_TYPES.values())


@pytest.mark.parametrize("cls", [cls for cls, params in VALID.items() if params], ids=lambda c: c.type)
def test_each_parameter_is_required_and_refused_when_negative_nan_infinite_or_not_a_number(cls):
    params = VALID[cls]
    for name in params:
        with pytest.raises(TypeError, match=name):
            cls(**{k: v for k, v in params.items() if k != name})
        for bad, words in ((-1.0, "finite and ≥ 0"), (math.nan, "finite and ≥ 0"), (math.inf, "finite and ≥ 0"),
                           ("1", "not a number"), (True, "not a number"), (None, "not a number")):
            with pytest.raises(EventError, match=rf"^{cls.type} event: {name} is .*{words}"):
                cls(**{**params, name: bad})


@pytest.mark.parametrize(("cls", "field"), [(LaplaceEvent, "l1_sensitivity"), (GaussianEvent, "l2_sensitivity"),
                                            (ExponentialEvent, "utility_sensitivity"),
                                            (SubsampledGaussianEvent, "clip_norm")])
def test_a_sensitivity_of_zero_is_refused(cls, field):
    with pytest.raises(EventError, match=rf"{field} is 0; it must be > 0"):
        cls(**{**VALID[cls], field: 0})


def test_a_dp_sgd_phase_samples_at_most_every_row_in_whole_steps():
    with pytest.raises(EventError, match="sample_rate 1.5 is above 1"):
        SubsampledGaussianEvent(**{**VALID[SubsampledGaussianEvent], "sample_rate": 1.5})
    with pytest.raises(EventError, match="steps 2.5 is not a whole number"):
        SubsampledGaussianEvent(**{**VALID[SubsampledGaussianEvent], "steps": 2.5})


def test_an_unknown_adjacency_is_refused_and_a_known_one_is_typed():
    with pytest.raises(EventError, match="adjacency 'swap' is not one of add_remove, replace_one"):
        GaussianEvent(l2_sensitivity=1.0, sigma=1.0, adjacency="swap")
    assert GaussianEvent(l2_sensitivity=1.0, sigma=1.0, adjacency="replace_one").adjacency is Adjacency.REPLACE_ONE


def test_numpy_numbers_are_stored_as_python_numbers_for_ledger_json():
    np = pytest.importorskip("numpy")
    event = SubsampledGaussianEvent(sample_rate=np.float32(0.5), noise_multiplier=np.float64(1.0), steps=np.int64(3),
                                    clip_norm=1)
    assert type(event.sample_rate) is float and type(event.steps) is int
    json.dumps(event.to_dict())


def test_recording_a_malformed_event_fails_at_the_moment_it_is_recorded():
    ledger = Ledger(Guarantee.FORMAL)
    with pytest.raises(EventError, match="gaussian event: sigma is -1.0"):
        ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=-1.0), delta=1e-5)
    with pytest.raises(EventError, match=r"records a privacy event .*got dict"):
        ledger.record({"mechanism": "gaussian", "sigma": 1.0}, delta=1e-5)
    with pytest.raises(EventError, match="epsilon is -0.5, not a number ≥ 0"):
        ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0), epsilon=-0.5)
    assert ledger.entries == []


def test_an_entry_claims_its_events_own_epsilon_unless_the_plugin_states_one():
    ledger = Ledger(Guarantee.FORMAL)
    laplace = ledger.record(LaplaceEvent(l1_sensitivity=2.0, scale=4.0))
    gaussian = ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=3.0), delta=1e-5)
    stated = ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=3.0), delta=1e-5, epsilon=2.5)
    assert laplace.epsilon == 0.5 and gaussian.epsilon == gaussian_epsilon(1e-5, 3.0) and stated.epsilon == 2.5


def test_conversions_follow_each_mechanisms_analysis():
    assert LaplaceEvent(l1_sensitivity=2.0, scale=4.0).pure_epsilon() == 0.5
    assert LaplaceEvent(l1_sensitivity=2.0, scale=4.0).zcdp_rho() == 0.125  # ε²/2
    gaussian = GaussianEvent(l2_sensitivity=2.0, sigma=4.0)
    assert gaussian.gdp_mu() == 0.5 and gaussian.zcdp_rho() == 0.125 and gaussian.pure_epsilon() is None
    assert gaussian.rdp_phase().noise_multiplier == 2.0 and gaussian.prv() is not None
    exponential = ExponentialEvent(inverse_temperature=0.25, utility_sensitivity=2.0)
    assert exponential.pure_epsilon() == 1.0 and exponential.zcdp_rho() == 1 / 8 and exponential.prv() is None
    phase = SubsampledGaussianEvent(**VALID[SubsampledGaussianEvent])
    assert phase.pure_epsilon() is None and phase.zcdp_rho() is None and phase.prv()[1] == 100
    assert ZcdpEvent(rho=0.1).epsilon(1e-5) == zcdp_epsilon(0.1, 1e-5)
    assert NonPrivateEvent().noise_free and GaussianEvent(l2_sensitivity=1.0, sigma=0.0).noise_free
    assert GaussianEvent(l2_sensitivity=1.0, sigma=0.0).epsilon(1e-5) == math.inf


def test_events_round_trip_through_json():
    ledger = Ledger(Guarantee.FORMAL)
    for cls, params in VALID.items():
        if cls is not NonPrivateEvent:
            ledger.record(cls(**params), delta=1e-6, epsilon=0.1, description=cls.type, details={"note": cls.type})
    ledger.claim(0.9, 1e-5, "rdp")
    again = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert again.entries == ledger.entries and again.epsilon == 0.9 and again.composition == "rdp"


@pytest.mark.parametrize(("raw", "message"), [
    ({"type": "gausian", "l2_sensitivity": 1.0, "sigma": 1.0}, "unknown privacy event type 'gausian'"),
    ({"type": "gaussian", "l2_sensitivity": 1.0}, "gaussian event: missing sigma"),
    ({"type": "gaussian", "l2_sensitivity": 1.0, "sigma": 1.0, "sigmaa": 2}, "gaussian event: unknown sigmaa"),
    ({"type": "laplace", "l1_sensitivity": 1.0, "scale": "1"}, "laplace event: scale is '1', not a number"),
])
def test_a_stored_event_that_no_accountant_can_read_is_refused_naming_it(raw, message):
    with pytest.raises(EventError, match=message):
        PrivacyEvent.from_dict(raw)
    stored = {"format": "dpgym-ledger/2", "guarantee": "formal", "epsilon": 1.0, "delta": 0.0,
              "entries": [{"event": raw, "epsilon": 1.0, "delta": 0.0}]}
    with pytest.raises(ValueError, match=rf"cell/ledger.json \(dpgym-ledger/2\): entry 0: {message}"):
        Ledger.from_dict(stored, "cell/ledger.json")


def test_a_ledger_of_another_format_is_refused_with_one_message_naming_the_format():
    with pytest.raises(ValueError, match=r"x/ledger.json: not a dpgym ledger \(format 'dpgym-ledger/9'; this dpgym "
                                         r"reads dpgym-ledger/2 and dpgym-ledger/1\)"):
        Ledger.from_dict({"format": "dpgym-ledger/9", "entries": []}, "x/ledger.json")


@pytest.mark.parametrize("name", ["dp_cgan", "mst", "independent", "real"])
def test_format_1_ledgers_written_by_earlier_runs_load_and_re_account_as_they_did(name):
    """Ledgers of a smoke run written before events were typed: the accounted parameters become the
    event, the rest its details, and the harness's figure is the one stored beside them then."""
    stored = json.loads((FORMAT_1 / f"{name}.json").read_text())
    ledger = Ledger.from_dict(stored, name)
    assert [e.type for e in ledger.entries] == [e["mechanism"] for e in stored["entries"]]
    for entry, raw in zip(ledger.entries, stored["entries"]):
        assert {**entry.event.parameters(), **entry.details, "adjacency": str(entry.event.adjacency)} == {
            "adjacency": "add_remove", **raw["params"]}
    again = reaccount(ledger, Budget(float(stored["budget"]["epsilon"]), stored["budget"]["delta"]))
    assert again.verdict == stored["reaccounted"]["verdict"] == "ok"
    if math.isfinite(again.epsilon):
        assert again.epsilon == pytest.approx(stored["reaccounted"]["epsilon"], rel=1e-9)


def test_a_format_1_entry_of_an_unknown_mechanism_is_refused_naming_the_entry():
    stored = {"format": "dpgym-ledger/1", "guarantee": "formal", "epsilon": 0.1, "delta": 0.0,
              "entries": [{"mechanism": "magic", "epsilon": 0.1, "delta": 0.0, "params": {}, "accountant": "trust me"}]}
    with pytest.raises(ValueError, match=r"old/ledger.json \(dpgym-ledger/1\): entry 0: unknown privacy event type "
                                         r"'magic'"):
        Ledger.from_dict(stored, "old/ledger.json")
