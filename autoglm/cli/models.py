"""``autoglm models``: register checkpoints as named versions and alias them (offline, on the registry), and
load, promote, roll back, split and inspect the versions a running server holds (through its admin API)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from autoglm.admin_client import API_KEY_ENV, DEFAULT_SERVER_URL, AdminClient, ServedModel
from autoglm.cli.logging import add_logging_arguments
from autoglm.config import AutoGLMConfig
from autoglm.registry import ModelVersion, Registry, base_checksum, registry_from_config

_MIB = 2**20


def _config(args: argparse.Namespace, **overrides: object) -> AutoGLMConfig:
    """Settings from --config, the AUTOGLM_* environment and --registry-dir, then ``overrides``."""
    return AutoGLMConfig.from_sources(args.config, overrides={"registry_dir": args.registry_dir, **overrides})


def _registry(args: argparse.Namespace) -> Registry:
    return registry_from_config(_config(args).server_config().versions)


def _held_out_perplexity(args: argparse.Namespace, checkpoint: Path) -> float:
    """The checkpoint's perplexity on the held-out corpus, as ``autoglm eval-ppl --held-out`` scores it."""
    from autoglm.corpus import read_corpus
    from autoglm.llm import LLM
    from autoglm.perplexity import evaluate_perplexity
    from autoglm.progress import show_progress

    llm = LLM.from_config(_config(args, model=str(checkpoint)))
    return evaluate_perplexity(llm, read_corpus().held_out, use_tqdm=show_progress()).perplexity


def _register(args: argparse.Namespace) -> int:
    registry = _registry(args)
    eval_ppl = _held_out_perplexity(args, args.path) if args.eval_ppl else None
    base_sha256 = base_checksum(registry, args.base) if args.base is not None else None
    version = registry.register(args.name, args.path, version=args.version, notes=args.notes, eval_ppl=eval_ppl,
                                base_sha256=base_sha256)
    aliases = _aliases_of(version, registry.aliases(version.name))
    print(f"registered {version.reference}{f' ({aliases})' if aliases else ''}: {version.architecture}, "
          f"{version.size_bytes / _MIB:.2f} MiB of weights, sha256 {version.sha256[:12]}, from {version.path}"
          + (f", eval-ppl {version.eval_ppl:.3f}" if version.eval_ppl is not None else ""))
    return 0


def _list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    names = registry.names()
    if not names:
        print("no models registered yet; add one with `autoglm models register NAME PATH`", file=sys.stderr)
        return 0
    print(f"{'name':24} {'versions':>8} {'latest':8} aliases")
    for name in names:
        versions = registry.versions(name)
        aliases = ", ".join(f"{alias}={version}" for alias, version in sorted(registry.aliases(name).items()))
        print(f"{name:24} {len(versions):>8} {versions[-1].version:8} {aliases or '-'}")
    return 0


def _show(args: argparse.Namespace) -> int:
    registry = _registry(args)
    aliases = registry.aliases(args.name)
    for version in registry.versions(args.name):
        tagged = _aliases_of(version, aliases)
        print(f"{version.reference}{f'  ({tagged})' if tagged else ''}")
        print(f"  path:          {version.path}")
        print(f"  architecture:  {version.architecture}")
        print(f"  weights:       {version.size_bytes / _MIB:.2f} MiB, sha256 {version.sha256}")
        print(f"  registered:    {version.created:%Y-%m-%d %H:%M:%S %Z}")
        if version.eval_ppl is not None:
            print(f"  eval-ppl:      {version.eval_ppl:.3f} (held-out corpus)")
        if version.notes:
            print(f"  notes:         {version.notes}")
    return 0


def _alias(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.remove:
        if args.version is not None:
            raise ValueError("--remove takes no VERSION: `autoglm models alias NAME ALIAS --remove`")
        registry.remove_alias(args.name, args.alias)
        print(f"removed alias {args.alias!r} of {args.name}")
        return 0
    if args.version is None:
        raise ValueError("give the VERSION the alias points at (`autoglm models alias NAME ALIAS VERSION`), "
                         "or --remove")
    registry.set_alias(args.name, args.alias, args.version)
    print(f"{args.name}@{args.alias} -> {args.name}@{args.version}")
    return 0


def _aliases_of(version: ModelVersion, aliases: dict[str, str]) -> str:
    return ", ".join(alias for alias, target in sorted(aliases.items()) if target == version.version)


def _client(args: argparse.Namespace) -> AdminClient:
    return AdminClient(url=args.url, api_key=args.api_key or os.environ.get(API_KEY_ENV))


def _print_served(models: Iterable[ServedModel]) -> None:
    for model in models:
        aliases = ", ".join(f"{alias}={version}" for alias, version in sorted(model.aliases.items()))
        canary = f"; canary {model.canary.version} at {model.canary.percent:g}%" if model.canary else ""
        print(f"{model.name}  (aliases: {aliases or 'none'}{canary})")
        print(f"  {'version':10} {'state':10} {'in flight':>9}  aliases")
        for version in model.versions:
            print(f"  {version.version:10} {version.state:10} {version.in_flight:>9}  "
                  f"{', '.join(version.aliases) or '-'}")


def _status(args: argparse.Namespace) -> int:
    models = _client(args).models()
    if args.name is not None:
        known = [model.name for model in models]
        models = [model for model in models if model.name == args.name]
        if not models:
            raise ValueError(f"the server at {args.url} serves no model {args.name!r}; it serves: "
                             f"{', '.join(known) or 'none'}")
    if not models:
        print(f"the server at {args.url} serves no model from the registry", file=sys.stderr)
    _print_served(models)
    return 0


def _operate(operation: str, *fields: str) -> Callable[[argparse.Namespace], int]:
    """A handler that posts ``operation`` with the named arguments as its JSON body and prints the answer."""
    def handler(args: argparse.Namespace) -> int:
        body = {field: getattr(args, field) for field in fields}
        _print_served([_client(args).operate(args.name, operation, body)])
        return 0
    return handler


def _percent(text: str) -> float:
    percent = float(text)
    if not 0 <= percent <= 100:
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to 100, got {text!r}")
    return percent


def _add_registry_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="settings file whose registry settings to use "
                        "(AUTOGLM_REGISTRY_DIR and --registry-dir override it)")
    parser.add_argument("--registry-dir", metavar="DIR", help="folder of the directory registry "
                        "(default: the registry_dir setting, else ~/.local/share/autoglm/registry)")


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_SERVER_URL, metavar="URL",
                        help=f"the running server's address (default: {DEFAULT_SERVER_URL})")
    parser.add_argument("--api-key", metavar="KEY",
                        help=f"an admin key, when the server has keys (default: ${API_KEY_ENV})")


def _add_offline_actions(actions: argparse._SubParsersAction) -> None:
    register = actions.add_parser(
        "register", help="record a checkpoint folder as a new version of a model",
        description="Record the checkpoint at PATH (left where it is) as the next version of NAME, with the "
                    "SHA-256 of its weight files, its architecture and size. The first version of a model "
                    "becomes its stable.")
    register.add_argument("name", metavar="NAME", help="the model's name, as requests will give it")
    register.add_argument("path", metavar="PATH", type=Path, help="the checkpoint folder (Hugging Face format)")
    register.add_argument("--version", metavar="VERSION", help="the version's id (default: the next number, 1, 2, ...)")
    register.add_argument("--notes", default="", metavar="TEXT",
                          help="free text kept with the version (what changed, ...)")
    register.add_argument("--base", metavar="REF",
                          help="for a LoRA adapter folder: the registered base model version it runs on (NAME, "
                               "NAME@ALIAS or NAME@VERSION); the adapter is pinned to that version's checksum and "
                               "served only on a model with those weights")
    register.add_argument("--eval-ppl", action="store_true",
                          help="score the checkpoint on the held-out corpus first (as `autoglm eval-ppl "
                               "--held-out`; engine settings from --config) and keep its perplexity")
    add_logging_arguments(register)
    register.set_defaults(handler=_register)
    listing = actions.add_parser("list", help="list the registered models, their versions and aliases")
    listing.set_defaults(handler=_list)
    show = actions.add_parser("show", help="show every version of a model: path, checksum, size, aliases")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(handler=_show)
    alias = actions.add_parser("alias", help="point an alias (stable, canary, any name) at a version, or remove it",
                               description="Point ALIAS of NAME at VERSION; requests then name it NAME@ALIAS "
                                           "(NAME alone means NAME@stable). A running server follows the "
                                           "registry only when told: use `autoglm models promote` there.")
    alias.add_argument("name", metavar="NAME")
    alias.add_argument("alias", metavar="ALIAS")
    alias.add_argument("version", metavar="VERSION", nargs="?")
    alias.add_argument("--remove", action="store_true", help="remove ALIAS instead")
    alias.set_defaults(handler=_alias)
    for action in (register, listing, show, alias):
        _add_registry_options(action)


def _add_remote_actions(actions: argparse._SubParsersAction) -> None:
    remote = []
    promote = actions.add_parser("promote", help="on the server: make a version stable (loading it if needed)")
    promote.set_defaults(handler=_operate("promote", "version"))
    load = actions.add_parser("load", help="on the server: load a version as a warm standby, without traffic")
    load.set_defaults(handler=_operate("load", "version"))
    unload = actions.add_parser("unload", help="on the server: unload a version that is neither stable nor canary")
    unload.set_defaults(handler=_operate("unload", "version"))
    for action in (promote, load, unload):
        action.add_argument("name", metavar="NAME")
        action.add_argument("version", metavar="VERSION")
        remote.append(action)
    rollback = actions.add_parser("rollback", help="on the server: make the previous stable version stable again")
    rollback.add_argument("name", metavar="NAME")
    rollback.set_defaults(handler=_operate("rollback"))
    canary = actions.add_parser("canary", help="on the server: send PERCENT of requests to a version (0 clears)")
    canary.add_argument("name", metavar="NAME")
    canary.add_argument("version", metavar="VERSION")
    canary.add_argument("percent", metavar="PERCENT", type=_percent, help="share of requests, 0 to 100")
    canary.set_defaults(handler=_operate("canary", "version", "percent"))
    status = actions.add_parser("status", help="on the server: each model's versions, states, requests in flight")
    status.add_argument("name", metavar="NAME", nargs="?", help="only this model")
    status.set_defaults(handler=_status)
    for action in (*remote, rollback, canary, status):
        _add_server_options(action)


def add_models_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models", help="register model versions and alias them; promote, roll back and split them on a server",
        description="register, list, show and alias work on the model registry (the registry settings). "
                    "promote, rollback, canary, load, unload and status talk to a running server's admin API.",
    )
    actions = parser.add_subparsers(dest="models_action", required=True)
    _add_offline_actions(actions)
    _add_remote_actions(actions)
