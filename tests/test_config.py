"""Settings precedence, OLLAMA_HOST forms, the config file, and -o option typing."""

from __future__ import annotations

import pytest

from localgpt_cli.config import load_settings, normalize_host
from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.llm.options import OPTION_RANGES, OPTION_TYPES, parse_options


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in ("OLLAMA_HOST", "LOCALGPT_MODEL", "LOCALGPT_HOME", "LOCALGPT_EMBED_MODEL",
                "LOCALGPT_DB", "LOCALGPT_COLLECTION", "LOCALGPT_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("localhost", "http://localhost:11434"),
        ("example.com:8080", "http://example.com:8080"),
        (":9999", "http://127.0.0.1:9999"),
        ("http://gpu-box:11434", "http://gpu-box:11434"),
        ("https://ollama.example.com", "https://ollama.example.com:443"),
        ("https://proxy.example.com/ollama/", "https://proxy.example.com:443/ollama"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:1234", "http://127.0.0.1:1234"),
        ("[::1]:4000", "http://[::1]:4000"),
        ("::", "http://[::1]:11434"),
        ("", "http://127.0.0.1:11434"),
    ],
)
def test_ollama_host_forms(raw, url):
    assert normalize_host(raw) == url


@pytest.mark.parametrize(
    "raw",
    ["ftp://x", "host:port", "::::", "localhost:70000", "http://h:65536", ":0", "a b",
     "[::1", "[zz]:1", "[::1]x"],
)  # fmt: skip
def test_bad_hosts_name_where_they_came_from(raw):
    with pytest.raises(InvalidInput, match=r"^OLLAMA_HOST "):
        normalize_host(raw)
    with pytest.raises(UsageError, match=r"^--host "):
        normalize_host(raw, "--host")


@pytest.mark.parametrize(
    "args",
    [("chat", "hi"), ("models",), ("models", "show", "qwen3"), ("models", "pull", "x"),
     ("models", "ps"), ("search", "vpn"), ("ingest", "."), ("tools",),
     ("eval", "--queries", "q", "--qrels", "r")],
)  # fmt: skip
@pytest.mark.parametrize(
    ("host", "problem"),
    [("::::", "is not a valid IPv6 address"), ("localhost:70000", "has an invalid port")],
)
def test_a_bad_ollama_host_is_one_line_exit_6_from_env_2_from_flag(
    clean_env, monkeypatch, args, host, problem
):
    from tests.cli import invoke

    monkeypatch.setenv("LOCALGPT_HOME", str(clean_env / "home"))
    monkeypatch.setenv("OLLAMA_HOST", host)
    monkeypatch.chdir(clean_env)
    (clean_env / "q").write_text("hello\n")
    (clean_env / "r").write_text("1\tx\t1\n")
    r = invoke(*args)
    assert r.exit_code == 6, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"localgpt: error: OLLAMA_HOST {host!r} {problem}")
    r = invoke("--host", host, *args)
    assert r.exit_code == 2 and r.stderr.startswith(f"localgpt: error: --host {host!r} ")


def test_precedence_flag_env_file_default(clean_env, monkeypatch):
    cfg = clean_env / "cfg" / "localgpt"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(
        'model = "from-file"\nembed_model = "file-embed"\nwindow = 8\n'
    )
    monkeypatch.setenv("LOCALGPT_MODEL", "from-env")
    s = load_settings({"model": None})
    assert (s.model, s.sources["model"]) == ("from-env", "env LOCALGPT_MODEL")
    assert s.embed_model == "file-embed" and s.sources["embed_model"].startswith("file ")
    assert s.window == 8
    assert s.sources["collection"] == "default"
    s = load_settings({"model": "from-flag"})
    assert (s.model, s.sources["model"]) == ("from-flag", "flag")


def test_home_and_db_follow_localgpt_home(clean_env, monkeypatch):
    monkeypatch.setenv("LOCALGPT_HOME", str(clean_env / "h"))
    s = load_settings()
    assert s.home == str(clean_env / "h")
    assert s.db == str(clean_env / "h" / "lancedb")
    monkeypatch.delenv("LOCALGPT_HOME")
    assert load_settings().home == str(clean_env / "data" / "localgpt")


def test_bad_config_file_is_a_clear_error(clean_env):
    cfg = clean_env / "cfg" / "localgpt"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text("model = \n")
    with pytest.raises(InvalidInput, match="config.toml"):
        load_settings()
    (cfg / "config.toml").write_text('modle = "x"\n')
    with pytest.raises(InvalidInput, match="modle"):
        load_settings()
    (cfg / "config.toml").write_text('window = "many"\n')
    with pytest.raises(InvalidInput, match="window"):
        load_settings()


def test_options_are_typed():
    opts = parse_options([("temperature", "0.2"), ("num_ctx", "8192"), ("seed", "7"),
                          ("stop", "###"), ("stop", "\n\n"), ("use_mmap", "false")])
    assert opts == {"temperature": 0.2, "num_ctx": 8192, "seed": 7, "stop": ["###", "\n\n"],
                    "use_mmap": False}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (("temperature", "hot"), "expects a number"),
        (("num_ctx", "8k"), "expects an integer"),
        (("use_mmap", "maybe"), "true or false"),
        (("temprature", "0"), "Unknown model option 'temprature'"),
    ],
)
def test_bad_options_are_usage_errors(pair, message):
    with pytest.raises(UsageError, match=message):
        parse_options([pair])


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (("temperature", "nan"), "'temperature' must be 0 or more, got 'nan'"),
        (("temperature", "-0.5"), "'temperature' must be 0 or more"),
        (("temperature", "inf"), "'temperature' must be 0 or more"),
        (("num_ctx", "-5"), "'num_ctx' must be 1 to 2147483647, got '-5'"),
        (("num_ctx", "0"), "'num_ctx' must be 1 to"),
        (("top_p", "7"), "'top_p' must be 0 to 1, got '7'"),
        (("min_p", "-0.1"), "'min_p' must be 0 to 1"),
        (("mirostat", "3"), "'mirostat' must be 0 to 2"),
        (("num_predict", "-3"), "'num_predict' must be -2 to"),
        (("seed", "-2"), "'seed' must be -1 to 4294967295"),
        (("presence_penalty", "2.5"), "'presence_penalty' must be -2 to 2"),
    ],
)
def test_out_of_range_options_are_usage_errors(pair, message):
    with pytest.raises(UsageError, match=message):
        parse_options([pair])


def test_every_numeric_option_has_a_range_and_its_ends_are_accepted():
    numeric = {k for k, kind in OPTION_TYPES.items() if kind in (int, float)}
    assert set(OPTION_RANGES) == numeric
    for key, (low, high) in OPTION_RANGES.items():
        kind = OPTION_TYPES[key]
        ends = [low] + ([high] if high is not None else [])
        for end in ends:
            assert parse_options([(key, str(kind(end)))]) == {key: kind(end)}
        below = str(kind(low) - 1 if kind is int else low - 0.01)
        with pytest.raises(UsageError, match=key):
            parse_options([(key, below)])
        if high is not None:
            with pytest.raises(UsageError, match=key):
                parse_options([(key, str(kind(high) + 1 if kind is int else high + 0.01))])
