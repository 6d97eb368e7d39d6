"""How many workers, and each worker's configuration (``gateway.workers.plan``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, GatewayConfig, parse_config
from gateway.workers.plan import decide, per_process_limits, per_process_state, worker_config


def config(**sections: Any) -> GatewayConfig:
    data: dict[str, Any] = {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [
            {
                "name": "l",
                "bootstrap_port": 9192,
                "broker_port_base": 9200,
                "advertised_host": "127.0.0.1",
            }
        ],
    }
    data.update(sections)
    return parse_config(data)


REDIS_QUOTAS = {"redis_url": "redis://127.0.0.1:6379", "expected_instances": 3}


def test_server_workers_defaults_to_zero_and_is_validated() -> None:
    assert config().server.workers == 0
    assert config(server={"workers": 4}).server.workers == 4
    with pytest.raises(ConfigError, match=r"server\.workers"):
        config(server={"workers": -1})
    with pytest.raises(ConfigError, match=r"server\.bogus"):
        config(server={"bogus": 1})


@pytest.mark.parametrize(
    ("requested", "configured", "cores", "expected"),
    [(None, 0, 8, 8), (None, 3, 8, 3), (2, 3, 8, 2), (0, 3, 8, 8), (None, 0, 1, 1), (1, 0, 8, 1)],
)
def test_the_count_comes_from_the_flag_then_the_file_then_the_cores(
    requested: int | None, configured: int, cores: int, expected: int
) -> None:
    decision = decide(requested, configured, cores, config())
    assert (decision.workers, decision.error, decision.warnings) == (expected, None, ())


def test_per_process_quotas_are_refused_with_explicit_workers() -> None:
    local = config(quotas={"plans": {}})
    assert per_process_state(local)
    decision = decide(2, 0, 8, local)
    assert decision.error is not None and "quotas.redis_url" in decision.error


def test_per_process_quotas_fall_back_to_one_worker_when_the_count_is_the_default() -> None:
    decision = decide(None, 0, 8, config(quotas={"plans": {}}))
    assert decision.workers == 1 and decision.error is None
    assert "ONE worker" in decision.warnings[0]


def test_one_worker_never_complains_and_redis_quotas_are_shared() -> None:
    assert decide(1, 0, 8, config(quotas={"plans": {}})) == decide(1, 0, 8, config())
    shared = decide(4, 0, 8, config(quotas=REDIS_QUOTAS))
    assert shared.workers == 4 and shared.error is None
    assert len(shared.warnings) == 1 and "4 x the limit" in shared.warnings[0]


def test_a_worker_gets_a_private_metrics_port_its_own_access_log_and_counts_as_an_instance() -> (
    None
):
    base = config(
        metrics={"port": 9404, "bind_host": "0.0.0.0"},
        accesslog={"path": "/var/log/kgw/access.log"},
        quotas=REDIS_QUOTAS,
    )
    mine = worker_config(base, slot=1, workers=4)
    assert mine.server.workers == 4
    assert mine.metrics is not None and (mine.metrics.bind_host, mine.metrics.port) == (
        "127.0.0.1",
        0,
    )
    assert mine.accesslog is not None and mine.accesslog.path == Path("/var/log/kgw/access.w1.log")
    assert mine.quotas is not None and mine.quotas.expected_instances == 12
    assert mine.listeners == base.listeners


def test_a_single_worker_keeps_the_configuration_as_it_is() -> None:
    base = config(metrics={"port": 9404}, accesslog={"path": "access.log"}, quotas=REDIS_QUOTAS)
    mine = worker_config(base, slot=0, workers=1)
    assert mine.metrics == base.metrics and mine.accesslog == base.accesslog
    assert mine.quotas == base.quotas and mine.server.workers == 1


def test_service_monitoring_runs_in_the_first_worker_only() -> None:
    base = config(monitoring={"enabled": True})
    assert worker_config(base, slot=0, workers=2).monitoring == base.monitoring
    assert worker_config(base, slot=1, workers=2).monitoring is None


def test_the_login_limiter_warning_is_only_given_when_nothing_shares_it(tmp_path: Path) -> None:
    def limiter_warned(quotas: dict[str, Any] | None = None, **limiter: Any) -> bool:
        store = {"file": str(tmp_path / "credentials.json")}
        sasl = {"mechanisms": ["PLAIN"], "credential_store": store, "failure_limiter": limiter}
        warnings = per_process_limits(config(sasl=sasl, quotas=quotas), 4)
        return any("login failure limiter" in warning for warning in warnings)

    assert limiter_warned()
    assert not limiter_warned(REDIS_QUOTAS)  # the quotas' Redis shares it too
    assert limiter_warned(REDIS_QUOTAS, shared=False)
    assert not limiter_warned(redis_url="redis://127.0.0.1:6379/0")
    assert limiter_warned(redis_url="redis://127.0.0.1:6379/0", shared=False)
