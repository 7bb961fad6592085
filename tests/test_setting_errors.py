"""One rule for a bad setting's exit code: typed as a flag -> usage error (exit 2); read from
an environment variable or config.toml -> invalid input (exit 6). Either way one line on
stderr naming where the value came from, no traceback, nothing sent to the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import Result, invoke
from tests.standin import StandIn


def write_config(isolated_env: Path, text: str) -> Path:
    path = isolated_env / "config" / "localgpt" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def refused(r: Result, code: int, *names: str) -> None:
    """Exit `code`, one `localgpt: error:` line naming each of `names`, nothing on stdout."""
    assert r.exit_code == code, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("localgpt: error: "), line
    for name in names:
        assert name in line, (name, line)
    assert r.stdout == "" and "Traceback" not in r.stderr


# (the command with the flag, what the line names, env var, config.toml text, bad value,
# the command without the flag)
FAMILIES = {
    "host": (("--host", "localhost:70000", "chat", "hi"), "--host", "OLLAMA_HOST",
             'host = "localhost:70000"\n', "localhost:70000", ("chat", "hi")),
    "provider": (("chat", "--provider", "nope", "hi"), "--provider", "LOCALGPT_PROVIDER",
                 'provider = "nope"\n', "nope", ("chat", "hi")),
    "tools.groups": (("chat", "--tools", "files,typo", "hi"), "--tools", "LOCALGPT_TOOLS",
                     '[tools]\ngroups = ["files", "typo"]\n', "files,typo", ("chat", "hi")),
    "collection": (("search", "-C", "a b", "vpn"), "--collection", "LOCALGPT_COLLECTION",
                   'collection = "a b"\n', "a b", ("search", "vpn")),
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_flag_exits_2_environment_and_file_exit_6(
    standin: StandIn, isolated_env: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    with_flag, flag, env, toml, value, command = FAMILIES[family]
    refused(invoke(*with_flag), 2, flag)
    monkeypatch.setenv(env, value)
    refused(invoke(*command), 6, env)
    monkeypatch.delenv(env)  # for host: the stand-in's address, which outranks the file
    config = write_config(isolated_env, toml)
    refused(invoke(*command), 6, str(config))
    assert standin.chat_requests() == []


def test_a_profiles_bad_ollama_base_url_is_the_files_fault(isolated_env: Path) -> None:
    config = write_config(isolated_env,
                          '[providers.gpu]\nkind = "ollama"\nbase_url = "gpu:99999"\n')
    refused(invoke("chat", "hi"), 6, "[providers.gpu]", str(config), "invalid port")


def test_a_provider_without_model_from_the_environment_exits_6(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(isolated_env, '[providers.work]\nkind = "openai"\nbase_url = "http://x/v1"\n')
    refused(invoke("chat", "-m", "work:", "hi"), 2, "--model", "no default_model")
    monkeypatch.setenv("LOCALGPT_MODEL", "work:")
    refused(invoke("chat", "hi"), 6, "LOCALGPT_MODEL", "no default_model")


@pytest.mark.parametrize(
    ("env", "toml", "value", "named"),
    [("LOCALGPT_HISTORY_BACKEND", '[history]\nbackend = "cloud"\n', "cloud", "history.backend"),
     ("LOCALGPT_HISTORY_URL", '[history]\nurl = "mysql://db/x"\n', "mysql://db/x",
      "history.url")],
)  # fmt: skip
def test_history_settings_have_no_flag_and_exit_6(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, env: str, toml: str, value: str,
    named: str,
) -> None:
    monkeypatch.setenv(env, value)
    refused(invoke("history"), 6, env)
    monkeypatch.delenv(env)
    config = write_config(isolated_env, toml)
    refused(invoke("history"), 6, f"{named} in {config}")


@pytest.mark.parametrize(
    ("flag", "toml", "named"),
    [(("--theta", "3"), "[rag]\ntheta = 3\n", "rag.theta"),
     (("--pipeline", "turbo"), '[rag]\npipeline = "turbo"\n', "rag.pipeline"),
     (None, "[rag]\nstage_timeout = 0\n", "rag.stage_timeout"),
     (("--window", "many"), 'window = "many"\n', "window"),
     (("--window", "-1"), "window = -1\n", "window"),
     (("--timeout", "0"), "timeout = -5\n", "timeout"),
     (("--timeout", "nan"), "timeout = nan\n", "timeout")],
)  # fmt: skip
def test_rag_and_chat_settings_flag_2_file_6(
    standin: StandIn, isolated_env: Path, flag: tuple[str, str] | None, toml: str, named: str
) -> None:
    if flag is not None:
        r = invoke("chat", *flag, "hi")
        assert r.exit_code == 2 and flag[0] in r.stderr and "Traceback" not in r.stderr
    config = write_config(isolated_env, toml)
    refused(invoke("chat", "hi"), 6, named, str(config))
    assert standin.chat_requests() == []


def test_chunk_limits_come_only_from_flags_and_exit_2(isolated_env: Path) -> None:
    (isolated_env / "a.txt").write_text("hello\n")
    refused(invoke("ingest", "--chunk-size", "300", "--chunk-overlap", "300",
                   str(isolated_env / "a.txt")), 2, "--chunk-overlap", "--chunk-size")
