"""The real chaos run: the session stack under model and tool faults and session kills."""

from __future__ import annotations

from actors.chaos import ModelServer
from actors.chaos._faults import default_plan
from actors.chaos._runner import RunOptions, format_report, run_chaos


def test_a_bounded_real_run_with_faults_and_kills_of_settled_sessions_keeps_every_invariant(model_server: ModelServer) -> None:
    options = RunOptions(sessions=12, kills=4, kill_when="settled", seed=3, timeout=60.0)
    report = run_chaos(default_plan(), options, server=model_server)
    assert report.ok, format_report(report)
    assert report.kills == 4 and report.restarts == 4
    assert report.turns >= 12 and report.counts["completed"] > 0
    assert sum(report.faults.values()) > 0 and report.model_requests > report.turns
    assert report.percentile(0.5) <= report.percentile(0.99)


def test_fifty_sessions_with_model_faults_and_kills_at_any_moment_keep_every_invariant(model_server: ModelServer) -> None:
    options = RunOptions(sessions=50, kills=10, kill_when="anytime", seed=7, timeout=120.0)
    report = run_chaos(default_plan(), options, server=model_server)
    assert report.ok, format_report(report)
    assert report.kills == 10 and report.restarts == 10
    assert report.turns >= 50 and report.counts["completed"] > 0
    assert sum(report.faults.values()) > 0
