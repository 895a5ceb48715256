"""``cmx completion bash|zsh|fish``: a shell completion script, generated (no extra package).

The script completes command names, the recipe names and tags of ``cmx list recipes`` (asked
at completion time, so new recipes appear) and the common options. Install it with, e.g.,
``cmx completion bash > ~/.local/share/bash-completion/completions/cmx``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cmx_core.cli.parser import COMMAND_MODULES

SHELLS = ("bash", "zsh", "fish")
OPTIONS = ("--tags=", "--json", "--verbose", "--quiet", "--recipes", "--no-cache", "--refresh", "--output",
           "--executor", "--executor-opt", "--facts", "--help")
RECIPE_COMMANDS = ("run", "plan", "explain", "sweep", "show")

_BASH = r"""# cmx completion for bash (cmx completion bash)
_cmx_words() {
  cmx list recipes --wide 2>/dev/null | awk '{print $1; n=split($2, t, ","); for (i=1;i<=n;i++) print t[i]}' | sort -u
}
_cmx() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "__COMMANDS__" -- "$cur"))
  elif [[ "$cur" == --tags=* ]]; then
    COMPREPLY=($(compgen -P "--tags=" -W "$(_cmx_words)" -- "${cur#--tags=}"))
  else
    COMPREPLY=($(compgen -W "$(_cmx_words) __OPTIONS__" -- "$cur"))
  fi
}
complete -o default -o nospace -F _cmx cmx
"""
_ZSH = "# cmx completion for zsh (cmx completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n"
_FISH = """# cmx completion for fish (cmx completion fish)
function __cmx_words
    cmx list recipes --wide 2>/dev/null | string replace -r '^(\\S+)\\s+(\\S+).*' '$1,$2' | string split ,
end
complete -c cmx -f -n __fish_use_subcommand -a "__COMMANDS__"
complete -c cmx -f -n "__fish_seen_subcommand_from __RECIPE_COMMANDS__" -a "(__cmx_words)"
__FISH_OPTIONS__
"""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                            description="Print a completion script: eval \"$(cmx completion bash)\"")
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(handler=cmd_completion)


def script(shell: str, commands: list[str]) -> str:
    """The completion script of ``shell`` for these command names."""
    bash = _BASH.replace("__COMMANDS__", " ".join(commands)).replace("__OPTIONS__", " ".join(OPTIONS))
    if shell == "bash":
        return bash
    if shell == "zsh":
        return _ZSH + bash
    options = "\n".join(f"complete -c cmx -l {o.strip('-=')}" for o in OPTIONS)
    return (_FISH.replace("__COMMANDS__", " ".join(commands))
            .replace("__RECIPE_COMMANDS__", " ".join(RECIPE_COMMANDS)).replace("__FISH_OPTIONS__", options))


def cmd_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell, sorted(COMMAND_MODULES)))
    return 0
