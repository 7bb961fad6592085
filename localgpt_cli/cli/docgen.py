"""Man pages and shell completions, generated from the click commands themselves.

`.ci/gendocs.py` writes them to man/ and completions/ (installed by `pip install .` under
share/, see pyproject's data-files), and `localgpt man` / `localgpt completions` print the
same text, so an editable install, which gets no data files, can have them too. The
completions are static scripts: pressing Tab never starts Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import click

from localgpt_cli import __version__
from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.errors import UsageError

PROG = "localgpt"


def walk(
    cmd: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command with its path, depth first, subcommands sorted."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=path[-1])
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, (*path, name))


def options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]


def arguments(cmd: click.Command) -> list[click.Argument]:
    return [p for p in cmd.params if isinstance(p, click.Argument)]


def flags_of(opt: click.Option) -> list[str]:
    return [*opt.opts, *opt.secondary_opts]


def takes_value(opt: click.Option) -> bool:
    return not opt.is_flag and not opt.count


def subcommands(cmd: click.Command) -> list[tuple[str, str]]:
    if not isinstance(cmd, click.Group):
        return []
    ctx = click.Context(cmd)
    out = []
    for name in cmd.list_commands(ctx):
        sub = cmd.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            out.append((name, sub.get_short_help_str(limit=80)))
    return out


def help_of(opt: click.Option) -> str:
    return " ".join((opt.help or "").split())


def path_like(param: click.Parameter) -> bool:
    return isinstance(param.type, click.Path | click.File) or (
        param.name is not None and param.name in ("path", "paths", "file", "files")
    )


def choices(param: click.Parameter) -> list[str]:
    return list(param.type.choices) if isinstance(param.type, click.Choice) else []


# -- man pages -------------------------------------------------------------------------


def roff(text: str) -> str:
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln[:1] in (".", "'") else ln for ln in out.splitlines())


def _summary(name: str, cmd: click.Command) -> str:
    """The NAME line's words: the short help without the name in front (not twice)."""
    short = cmd.get_short_help_str(limit=100).removeprefix(f"{name}: ")
    return short[:1].upper() + short[1:]


def man_page(path: tuple[str, ...], cmd: click.Command) -> str:
    name = "-".join(path)
    ctx = click.Context(cmd, info_name=" ".join(path))
    lines = [
        f'.TH "{name.upper()}" "1" "" "localgpt {__version__}" "localgpt manual"',
        ".SH NAME",
        f"{roff(name)} \\- {roff(_summary(name, cmd))}",
        ".SH SYNOPSIS",
        f".B {roff(' '.join(path))}",
        roff(" ".join(cmd.collect_usage_pieces(ctx))),
        ".SH DESCRIPTION",
    ]
    help_text = (cmd.help or "").split("\f")[0]
    for para in help_text.strip().split("\n\n"):
        lines += [roff(" ".join(para.split())), ".PP"]
    if options(cmd):
        lines.append(".SH OPTIONS")
        for opt in options(cmd):
            spec = ", ".join(flags_of(opt))
            if takes_value(opt):
                spec += " " + (opt.metavar or opt.make_metavar(ctx))
            lines += [".TP", f".B {roff(spec)}", roff(help_of(opt) or "-")]
    subs = subcommands(cmd)
    if subs:
        lines.append(".SH COMMANDS")
        for sub, short in subs:
            lines += [".TP", f".B {roff(sub)}", roff(short), f"See \\fB{name}-{sub}\\fR(1)."]
    if cmd.epilog:
        lines += [".SH EXAMPLES", ".nf", roff(cmd.epilog.replace("\b\n", "").rstrip()), ".fi"]
    if len(path) == 1:
        lines += [
            ".SH ENVIRONMENT",
            ".TP",
            ".B OLLAMA_HOST",
            "Ollama server (host, host:port or URL).",
            ".TP",
            ".B LOCALGPT_HOME",
            "Folder for all data (history, LanceDB, lock).",
            ".TP",
            ".B LOCALGPT_MODEL",
            "Default chat model.",
            ".TP",
            ".B LOCALGPT_EMBED_MODEL",
            "Embedding model (default nomic-embed-text).",
            ".TP",
            ".B NO_COLOR",
            "Disable colour.",
        ]
    see = sorted({"-".join(path[:-1])} - {""}) + [f"{name}-{s}" for s, _ in subs]
    if see:
        lines += [".SH SEE ALSO", ", ".join(f"\\fB{roff(s)}\\fR(1)" for s in see)]
    return "\n".join(lines) + "\n"


# -- completions -----------------------------------------------------------------------


def tree() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command of `localgpt`, the group itself first."""
    from localgpt_cli.cli.main import cli

    return list(walk(cli, (PROG,)))


def bash_script() -> str:
    cases = []
    for path, cmd in tree():
        key = " ".join(path[1:])
        flags = [f for o in options(cmd) for f in flags_of(o)]
        subs = [s for s, _ in subcommands(cmd)]
        value_cases = []
        for o in options(cmd):
            if not takes_value(o):
                continue
            pattern = "|".join(flags_of(o))
            if choices(o):
                value_cases.append(
                    f'            {pattern}) COMPREPLY=($(compgen -W "{" ".join(choices(o))}" '
                    f'-- "$cur")); return;;'
                )
            elif path_like(o):
                value_cases.append(
                    f'            {pattern}) COMPREPLY=($(compgen -f -- "$cur")); return;;'
                )
            else:
                value_cases.append(f"            {pattern}) return;;")
        files = any(path_like(a) for a in arguments(cmd))
        body = [f'        "{key}")']
        if value_cases:
            body += ['            case "$prev" in', *value_cases, "            esac"]
        body.append(
            f'            flags="{" ".join(flags)}"; subs="{" ".join(subs)}"; '
            f"files={1 if files else 0};;"
        )
        cases.append("\n".join(body))
    groups = {" ".join(p[1:]): [s for s, _ in subcommands(c)] for p, c in tree() if subcommands(c)}
    group_cases = "\n".join(
        f'            "{k}") case "$w" in {"|".join(v)}) path="${{path:+$path }}$w";; esac;;'
        for k, v in groups.items()
    )
    return f"""# bash completion for localgpt (generated by .ci/gendocs.py; do not edit)
_localgpt() {{
    local cur prev flags="" subs="" path="" w i files=0
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$path" in
{group_cases}
        esac
    done
    case "$path" in
{chr(10).join(cases)}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -n "$subs" ]]; then
        COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    elif [[ $files -eq 1 ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o default -F _localgpt localgpt
"""


CONT = " \\\n"


def zsh_escape(text: str) -> str:
    return (
        text.replace("\\", "\\\\")
        .replace("'", "'\\''")
        .replace("[", "\\[")
        .replace("]", "\\]")
        .replace(":", "\\:")
    )


def zsh_script() -> str:
    funcs = []
    for path, cmd in tree():
        fname = "_" + "_".join(path)
        specs = []
        for o in options(cmd):
            names = flags_of(o)
            desc = zsh_escape(help_of(o))
            if takes_value(o):
                action = (
                    f"({' '.join(choices(o))})"
                    if choices(o)
                    else ("_files" if path_like(o) else " ")
                )
                value = f":{zsh_escape(o.name or 'value')}:{action}"
            else:
                value = ""
            group = "(" + " ".join(names) + ")" if len(names) > 1 else ""
            brace = "{" + ",".join(names) + "}" if len(names) > 1 else names[0]
            specs.append(
                f"    '{group}'{brace}'[{desc}]{value}'"
                if len(names) > 1
                else f"    '{brace}[{desc}]{value}'"
            )
        subs = subcommands(cmd)
        if subs:
            described = " ".join(f"'{s}:{zsh_escape(h)}'" for s, h in subs)
            specs += ["    '1: :->cmds'", "    '*:: :->args'"]
            dispatch = "\n".join(f"        {s}) {fname}_{s} ;;" for s, _ in subs)
            joined = CONT.join(specs)
            body = f"""{fname}() {{
  local state line
  _arguments -C \\
{joined}
  case $state in
    cmds) local -a cmds; cmds=({described}); _describe command cmds ;;
    args)
      case $line[1] in
{dispatch}
      esac ;;
  esac
}}"""
        else:
            rest = (
                "    '*:file:_files'" if any(path_like(a) for a in arguments(cmd)) else "    '*: :'"
            )
            joined = CONT.join([*specs, rest])
            body = f"""{fname}() {{
  _arguments \\
{joined}
}}"""
        funcs.append(body)
    return (
        "#compdef localgpt\n"
        "# zsh completion for localgpt (generated by .ci/gendocs.py; do not edit)\n\n"
        + "\n\n".join(funcs)
        + '\n\n_localgpt "$@"\n'
    )


def fish_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def fish_script() -> str:
    lines = ["# fish completion for localgpt (generated by .ci/gendocs.py; do not edit)"]
    lines.append("complete -c localgpt -f")
    for path, cmd in tree():
        rel = path[1:]
        if not rel:
            cond = "__fish_use_subcommand"
        else:
            cond = " && ".join(f"__fish_seen_subcommand_from {w}" for w in rel)
        subs = subcommands(cmd)
        names = " ".join(name for name, _ in subs)
        sub_cond = cond if not rel else f"{cond} && not __fish_seen_subcommand_from {names}"
        for name, short in subs:
            desc = fish_escape(short)
            lines.append(f"complete -c localgpt -n '{sub_cond}' -a {name} -d '{desc}'")
        for o in options(cmd):
            parts = []
            for f in flags_of(o):
                parts.append(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}")
            extra = ""
            if takes_value(o):
                extra = (
                    f" -x -a '{' '.join(choices(o))}'"
                    if choices(o)
                    else (" -r -F" if path_like(o) else " -x")
                )
            desc = fish_escape(help_of(o))
            lines.append(f"complete -c localgpt -n '{cond}' {' '.join(parts)}{extra} -d '{desc}'")
        if any(path_like(a) for a in arguments(cmd)) and rel:
            lines.append(f"complete -c localgpt -n '{cond}' -F")
    return "\n".join(lines) + "\n"


# The scripts by shell, and the file name each shell looks them up by.
SCRIPTS: dict[str, Callable[[], str]] = {
    "bash": bash_script,
    "zsh": zsh_script,
    "fish": fish_script,
}
COMPLETION_FILES = {"bash": "localgpt", "zsh": "_localgpt", "fish": "localgpt.fish"}


def man_pages() -> dict[str, str]:
    """Every man page by name (`localgpt-docs-list`), as roff."""
    return {"-".join(path): man_page(path, cmd) for path, cmd in tree()}


# -- the commands -----------------------------------------------------------------------

COMPLETIONS_EPILOG = """\b
Examples:
  localgpt completions bash > ~/.local/share/bash-completion/completions/localgpt
  localgpt completions zsh > ~/.zfunc/_localgpt      # a folder on your $fpath
  localgpt completions fish > ~/.config/fish/completions/localgpt.fish
"""


@click.command(epilog=COMPLETIONS_EPILOG)
@click.argument("shell", type=click.Choice(sorted(SCRIPTS)))
@json_option
@pass_app
def completions(app: App, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish).

    `pip install .` installs them where the shells look; an editable install does not.
    """
    script = SCRIPTS[shell]()
    if app.output.json:
        app.output.record({"type": "completion", "shell": shell, "script": script})
        return
    app.output.stdout.write(script)
    app.output.stdout.flush()


MAN_EPILOG = """\b
Examples:
  localgpt man | man -l -
  localgpt man docs list | man -l -
"""


@click.command(epilog=MAN_EPILOG)
@click.argument("command", nargs=-1)
@json_option
@pass_app
def man(app: App, command: tuple[str, ...]) -> None:
    """Print the man page (roff) of localgpt or of one of its COMMANDs.

    `pip install .` installs them where man looks; an editable install does not.
    """
    pages = man_pages()
    name = "-".join((PROG, *command))
    if name not in pages:
        raise UsageError(
            f"No man page for {' '.join((PROG, *command))!r}.",
            hint="Pages: "
            + ", ".join(
                p.removeprefix(PROG + "-").replace("-", " ") for p in sorted(pages) if p != PROG
            )
            + ".",
        )
    if app.output.json:
        app.output.record({"type": "man_page", "name": name, "section": 1, "roff": pages[name]})
        return
    app.output.stdout.write(pages[name])
    app.output.stdout.flush()
