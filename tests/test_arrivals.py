"""Arrival schedules (loadtest/client/arrivals.py): gamma's burstiness beside constant and
poisson, its mean rate, its dispersion, its seed, and its bad values refused in one line."""

from __future__ import annotations

import hashlib
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.client.arrivals import OpenLoop, open_loop_from_options, send_offsets_ns
from rig_helpers import first_through_the_process


def _gaps_s(burstiness: float, rate: float = 10.0, n: int = 20_000, seed: int = 1) -> np.ndarray:
    return np.diff(send_offsets_ns(n, rate, "gamma", seed, burstiness)) / 1e9


def _options(**given_options: str) -> SimpleNamespace:
    return SimpleNamespace(**{"rate": "", "arrival": "poisson", "arrival_seed": "0",
                              "burstiness": "", **given_options})


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_keeps_the_mean_rate_whatever_the_burstiness(burstiness: float):
    gaps = _gaps_s(burstiness)
    assert (gaps >= 0).all()
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)  # 1/R at R = 10/s


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_vary_as_one_over_root_burstiness(burstiness: float):
    gaps = _gaps_s(burstiness)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.1)


def test_lower_burstiness_means_burstier_counts():
    """The index of dispersion (variance / mean) of arrivals per 1-second window: about 1 for
    Poisson (B = 1), above it for bursts (B < 1), below it for smoother traffic (B > 1)."""
    def dispersion(burstiness: float) -> float:
        offsets_s = np.asarray(send_offsets_ns(20_000, 10.0, "gamma", 3, burstiness)) / 1e9
        counts = np.bincount(offsets_s.astype(int))[:-1]  # whole windows only
        return counts.var() / counts.mean()

    bursty, poisson_like, smooth = dispersion(0.2), dispersion(1.0), dispersion(5.0)
    assert bursty > 3 > poisson_like > 0.7 and poisson_like < 1.3 and smooth < 0.5


def test_gamma_of_burstiness_one_is_poisson_in_distribution():
    gamma, poisson = _gaps_s(1.0), np.diff(send_offsets_ns(20_000, 10.0, "poisson", 1)) / 1e9
    assert np.quantile(gamma, [0.1, 0.5, 0.9]) == pytest.approx(
        np.quantile(poisson, [0.1, 0.5, 0.9]), rel=0.08)


def test_gamma_is_seeded():
    a = send_offsets_ns(500, 4.0, "gamma", 7, 0.3)
    assert a == send_offsets_ns(500, 4.0, "gamma", 7, 0.3)
    assert a != send_offsets_ns(500, 4.0, "gamma", 8, 0.3)
    assert a != send_offsets_ns(500, 4.0, "gamma", 7, 0.4)
    assert a[0] == 0


def test_the_row_and_the_digest_name_the_burstiness():
    gamma = OpenLoop(4.0, "gamma", 7, 0.3)
    columns = gamma.columns(10)
    assert (columns["arrival"], columns["burstiness"]) == ("gamma", 0.3)
    assert gamma.digest(10) != OpenLoop(4.0, "gamma", 7, 0.5).digest(10)
    assert "burstiness" not in OpenLoop(4.0, "poisson", 7).columns(10)
    # a poisson schedule's digest is what it was before gamma existed
    before = hashlib.sha256(json.dumps([4.0, "poisson", 7, 10]).encode()).hexdigest()[:16]
    assert OpenLoop(4.0, "poisson", 7).digest(10) == before


def test_options_give_a_gamma_schedule():
    loop = open_loop_from_options(_options(rate="2", arrival="gamma", burstiness="0.5",
                                           arrival_seed="4"))
    assert loop == OpenLoop(2.0, "gamma", 4, 0.5)
    assert open_loop_from_options(_options(rate="2", arrival="gamma")).burstiness == 1.0


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=" \t", min_size=1, max_size=4))
def test_a_rate_given_blank_is_refused_and_only_no_rate_is_closed_loop(blank: str):
    """`--rate " "` (an unset variable quoted, say) is no number: refused, as --max-tokens " " is;
    only no --rate at all (its default "") is the closed loop. Around a number, space is allowed."""
    with pytest.raises(ValueError, match="^--rate must be a number of requests per second, got "):
        open_loop_from_options(_options(rate=blank))
    assert open_loop_from_options(_options(rate="")) is None
    assert open_loop_from_options(_options(rate=f"{blank}2{blank}")).rate == 2.0


def _not_a_positive_number(text: str) -> bool:
    try:
        return not 0 < float(text) < math.inf
    except ValueError:
        return True


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(max_value=0).map(repr), st.just("inf"), st.just("nan"),
                 st.text(min_size=1, max_size=12).filter(lambda t: t.strip())
                 .filter(_not_a_positive_number)))
def test_a_burstiness_that_is_not_a_positive_number_is_refused(text: str):
    with pytest.raises(ValueError, match="^--burstiness must be a number above 0, got "):
        open_loop_from_options(_options(rate="2", arrival="gamma", burstiness=text))


@pytest.mark.parametrize("given_options, message", [
    ({"rate": "2", "arrival": "poisson", "burstiness": "0.5"}, "--burstiness shapes --arrival gamma"),
    ({"burstiness": "0.5"}, "give --rate too"),
    ({"rate": "1e-300", "arrival": "gamma", "burstiness": "1e-300"}, "leaves no gap to draw"),
])
def test_burstiness_out_of_place_is_refused(given_options: dict[str, str], message: str):
    with pytest.raises(ValueError, match=message):
        open_loop_from_options(_options(**given_options))


@pytest.mark.parametrize("args, message, locust", first_through_the_process([
    (["--rate", "2", "--arrival", "gamma", "--burstiness", "0"], "--burstiness must be a number above 0"),
    (["--rate", "2", "--arrival", "gamma", "--burstiness", "-1"], "--burstiness must be a number above 0"),
    (["--rate", "2", "--burstiness", "0.5"], "--burstiness shapes --arrival gamma"),
]))
def test_bad_burstiness_is_one_error_line_and_exit_2(args: list[str], message: str, locust, tmp_path):
    result = locust(*args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-1500:]
    assert not (tmp_path / "out" / "runs.csv").exists()  # nothing written
