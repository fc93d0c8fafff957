from __future__ import annotations

from pathlib import Path

import pytest

from kueue_tas.runtime.config import ConfigError, Settings, parse_bind

pytestmark = pytest.mark.usefixtures("no_settings_env")


def test_defaults() -> None:
    s = Settings()
    assert s.annotation_prefix == "kueue-tas.io/"
    assert s.scheduling_gate == "kueue-tas.io/topology"
    assert s.controller_name == "kueue-tas.io/topology"
    assert s.ungate_batch_period_seconds == 1.0
    assert (s.retry_backoff_base_seconds, s.retry_backoff_max_seconds) == (10, 600)
    assert s.patch_concurrency == 32
    assert s.leader_election is True
    assert (s.lease_name, s.lease_namespace) == ("kueue-tas", "kueue-tas-system")
    assert (s.lease_duration_seconds, s.renew_deadline_seconds, s.retry_period_seconds) == (12, 8, 2)
    assert (s.health_bind, s.metrics_bind) == (":8081", ":8080")
    assert s.health_address() == (None, 8081)
    assert s.log_level == "info" and s.log_format == "json"
    assert s.kubeconfig is None


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_TAS_PATCH_CONCURRENCY", "64")
    monkeypatch.setenv("KUEUE_TAS_LEADER_ELECTION", "false")
    monkeypatch.setenv("kueue_tas_log_level", "DEBUG")
    monkeypatch.setenv("KUEUE_TAS_KUBECONFIG", "/etc/kube/config")
    s = Settings()
    assert s.patch_concurrency == 64
    assert s.leader_election is False
    assert s.log_level == "debug"
    assert s.kubeconfig == Path("/etc/kube/config")


def test_from_file_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "config.yaml"
    f.write_text("patch_concurrency: 8\nlog-level: warning\nannotation_prefix: kueue.x-k8s.io/\nmetrics_bind: '0'\n")
    s = Settings.from_file(f)
    assert s.patch_concurrency == 8
    assert s.log_level == "warning"
    assert s.annotation_prefix == "kueue.x-k8s.io/"
    assert s.metrics_address() is None
    monkeypatch.setenv("KUEUE_TAS_PATCH_CONCURRENCY", "16")  # environment beats the file
    assert Settings.from_file(f).patch_concurrency == 16
    assert Settings.from_file(f, patch_concurrency=4).patch_concurrency == 4  # keywords beat both
    assert Settings.load(f).log_level == "warning"
    assert Settings.load().log_level == "info"  # no file: file values do not leak


def test_empty_file_is_defaults(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("")
    assert Settings.from_file(f) == Settings()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("patch_concurrency: 0\n", "patch_concurrency: Input should be greater than or equal to 1"),
        ("bogus: 1\n", "unknown setting(s) bogus"),
        ("- a\n", "must hold a mapping"),
        ("a: [\n", "not valid YAML"),
        ("annotation_prefix: kueue-tas.io\n", "annotation_prefix: must end with '/'"),
        ("scheduling_gate: 'not a gate!'\n", "scheduling_gate: must be a Kubernetes qualified name"),
        ("lease_namespace: Kueue_Tas\n", "lease_namespace: must be a DNS label"),
        ("health_bind: localhost\n", "health_bind: bind address 'localhost'"),
        ("health_bind: ':99999'\n", "port must be a number"),
        ("renew_deadline_seconds: 20\n", "renew_deadline_seconds (20.0) must be < lease_duration_seconds (12.0)"),
        ("retry_period_seconds: 9\n", "retry_period_seconds (9.0) * 1.2 must be < renew_deadline_seconds"),
        ("retry_backoff_max_seconds: 1\n", "retry_backoff_max_seconds (1.0) must be >= retry_backoff_base_seconds"),
        ("log_level: loud\n", "log_level: Input should be"),
    ],
)
def test_invalid_files_give_clear_errors(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as ei:
        Settings.from_file(f)
    assert expected in str(ei.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        Settings.from_file(tmp_path / "nope.yaml")


def test_lease_timing_not_checked_without_election() -> None:
    s = Settings(leader_election=False, renew_deadline_seconds=30)
    assert s.renew_deadline_seconds == 30


def test_env_error_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_TAS_PATCH_CONCURRENCY", "lots")
    with pytest.raises(ConfigError, match="patch_concurrency"):
        Settings.load()


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValueError):
        s.patch_concurrency = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [(":8080", (None, 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9", ("::1", 9)), ("0", None)],
)
def test_parse_bind(text: str, expected: tuple[str | None, int] | None) -> None:
    assert parse_bind(text) == expected
