"""``cmx results predict`` and ``cmx results suggest`` (#51): a model learnt from the stored
runs of one recipe on one hardware class (:mod:`cmx_core.results.predict`) predicts a metric,
with a 90 % interval, where no run was made, and picks the runs worth making next."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from cmx_core import paths
from cmx_core.cli.recipe_doc import input_option
from cmx_core.results.grid import Column, Grid, fit, fit_text, width_for
from cmx_core.results.learning_set import NO_VARIATION, VARIATIONS, LearningQuery, Value, learning_set
from cmx_core.results.numbers import fmt_number
from cmx_core.results.store import ResultStore

SHORT_ID = 8


def add_parsers(sub: Any, leaf: dict[str, Any], finish: Any) -> None:
    """``results predict`` and ``results suggest``; ``finish`` adds the output options and handler."""
    p = sub.add_parser("predict", help="predict a metric, with a 90%% interval, for configurations never run",
                       **leaf)
    _learning_options(p)
    p.add_argument("--at", action="append", required=True, metavar="KEY=VALUE,...",
                   help="a configuration to predict (repeatable), e.g. --at batch_size=64,threads=4")
    finish(p, cmd_predict)
    p = sub.add_parser("suggest", help="the unmeasured configurations most worth running next", **leaf)
    _learning_options(p)
    p.add_argument("--count", type=_positive, default=5, help="how many to suggest (default 5)")
    finish(p, cmd_suggest)


def _learning_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="the recipe whose stored runs the model learns from")
    parser.add_argument("--metric", help="the metric (default: the runs' primary metric)")
    parser.add_argument("--hardware", metavar="CLASS",
                        help="the hardware class (default: the only one the runs have; see 'cmx results compare')")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _model(args: argparse.Namespace) -> Any:
    from cmx_core.plugins.extras import require_extra  # deferred: only these commands check the extra
    from cmx_core.results.predict import Model  # deferred: pulls scikit-learn in when it fits

    require_extra("cmx-core", "learn", f"cmx results {args.results_command}")
    store = ResultStore(paths.results_db())
    return Model(learning_set(store, LearningQuery(args.recipe, args.metric, args.hardware)))


def cmd_predict(args: argparse.Namespace) -> int:
    from cmx_core.results.predict import parse_config  # deferred: as _model

    configs = [parse_config(text) for text in args.at]
    model = _model(args)
    predictions = model.predict(configs)
    if args.json:
        _print_json({**_learnt(model), "predictions": [p.to_json() for p in predictions]})
        return 0
    width = width_for(args.wide)
    rows = tuple((_config_text(model, p.config), fmt_number(p.value), f"{fmt_number(p.low)}..{fmt_number(p.high)}",
                  _flags(p)) for p in predictions)
    columns = (Column("configuration"), Column(f"{model.data.metric} ({model.data.unit})", right=True, whole=True),
               Column("90% interval", right=True, whole=True), Column("note", drop=1))
    sys.stdout.write(fit(Grid(columns, rows), width).text())
    print(fit_text(_learnt_line(model), width))
    return 0


def cmd_suggest(args: argparse.Namespace) -> int:
    from cmx_core.results.suggest import suggest  # deferred: as _model

    model = _model(args)
    found = suggest(model, args.count)
    if args.json:
        _print_json({**_learnt(model), "suggestions": [{**s.to_json(), "command": _command(model, s.prediction.config)}
                                                       for s in found]})
        return 0
    width = width_for(args.wide)
    if not found:
        print(fit_text(f"every configuration on the grid of the levels run is measured; {_learnt_line(model)}", width))
        return 0
    better = "upper" if model.data.higher_is_better else "lower"
    print(fit_text(f"{len(found)} unmeasured configuration(s), best {better} end of the 90% interval of "
                   f"{model.data.metric} ({model.data.unit}) first; {_learnt_line(model)}", width))
    for rank, item in enumerate(found, 1):
        p = item.prediction
        print(fit_text(f"{rank}. {_config_text(model, p.config)}: {fmt_number(p.value)} "
                       f"({fmt_number(p.low)}..{fmt_number(p.high)}){' ' + _flags(p) if _flags(p) else ''}", width))
        print(f"   {_command(model, p.config)}")  # a line of its own, never wrapped: it is copied
    return 0


def _config_text(model: Any, config: dict[str, Value]) -> str:
    return ",".join(f"{axis.name}={_text(config[axis.name])}" for axis in model.axes)


def _flags(prediction: Any) -> str:
    notes = ["extrapolated" if prediction.extrapolated else "", "measured" if prediction.measured else ""]
    return ", ".join(n for n in notes if n)


def _learnt(model: Any) -> dict[str, Any]:
    data = model.data
    return {"recipe": data.recipe, "metric": data.metric, "unit": data.unit, "hardware_class": data.hardware,
            "higher_is_better": data.higher_is_better, "axes": list(data.axes), "fixed": data.fixed,
            "learnt_from": [o.run_id for o in data.observations], "model": "gaussian-process",
            "interval_scale": model.interval_scale}


def _learnt_line(model: Any) -> str:
    data = model.data
    ids = ", ".join(o.run_id[:SHORT_ID] for o in data.observations[:6])
    more = f" and {len(data.observations) - 6} more" if len(data.observations) > 6 else ""
    return (f"learnt from {len(data.observations)} runs of {data.recipe} on {data.hardware} "
            f"(axes {', '.join(data.axes)}): {ids}{more}")


def _command(model: Any, config: dict[str, Value]) -> str:
    """``cmx run recipe --tags=... --KEY=VALUE ...`` for the axis values (variations as tags)."""
    tags = [t for t in model.data.tags if t not in _variation_names(model)]
    options = []
    for axis in model.axes:
        value = config[axis.name]
        if axis.name == VARIATIONS:
            tags += [name for name in str(value).split("+") if name != NO_VARIATION]
        else:
            options.append(f"{input_option(axis.name)}={_text(value)}")
    return shlex.join(["cmx", "run", "recipe", f"--tags={','.join(tags)}", *options])


def _variation_names(model: Any) -> set[str]:
    """Every variation some run selected: a tag of the newest run's query that is one of
    them is not repeated in a suggested command that picks another."""
    axis = next((a for a in model.axes if a.name == VARIATIONS), None)
    return {name for level in (axis.levels if axis else ()) for name in str(level).split("+")}


def _text(value: Value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

