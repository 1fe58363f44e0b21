"""The ``cfkit`` command line.

Commands are thin: parse options, call one library function, render the result.
Each command group lives in its own module and is imported only when used, so
``cfkit --help`` stays fast and never loads torch, diffusers, transformers,
openai or lpips.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys

import click

from cfkit import __version__
from cfkit.errors import CfkitError

# name -> (module, attribute). A module that is not there yet is left out of --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("cfkit.cli.init", "init"),
    "cases": ("cfkit.cli.cases", "cases"),
    "specs": ("cfkit.cli.specs", "specs"),
    "edit": ("cfkit.cli.edit", "edit"),
    "edits": ("cfkit.cli.edit", "edits"),
    "check": ("cfkit.cli.check", "check"),
    "review": ("cfkit.cli.review", "review"),
    "sheet": ("cfkit.cli.review", "sheet"),
    "captions": ("cfkit.cli.captions", "captions"),
    "probe": ("cfkit.cli.probe", "probe"),
    "runs": ("cfkit.cli.runs", "runs"),
    "report": ("cfkit.cli.report", "report"),
    "audit": ("cfkit.cli.audit", "audit"),
    "demo": ("cfkit.cli.demo", "demo"),
    "weights": ("cfkit.cli.weights", "weights"),
    "view": ("cfkit.cli.view", "view"),
    "study": ("cfkit.cli.study", "study"),
}

#: name -> the one-line summary ``cfkit --help`` lists, so that listing imports no command module
#: (tests/package/test_hotpath_imports.py checks each against its command's own short help). A command
#: missing here is still listed: its module is imported for its summary.
SUMMARIES: dict[str, str] = {
    "init": "Make a workspace and check the dataset it points at.",
    "cases": "Validate or import the dataset's case records.",
    "specs": "Edit specs: one YAML file per counterfactual pair in interventions/.",
    "edit": "Make counterfactual edits of specs' source images, save them, record them, check them.",
    "edits": "Recorded edits and their provenance.",
    "check": "Measure how well edits keep everything outside their masks.",
    "review": "Review edits in the terminal: original | edited | difference, metrics and verdict.",
    "sheet": "A contact sheet of all pairs (or the given ones), laid out like Figure S8: HTML and a PNG.",
    "captions": "Captions for the modality probe: build, lint, show and draft.",
    "probe": "Ask a model every question of a suite and store every reply.",
    "runs": "Stored probe runs: list, show, rm, export, import, reparse, unparsed.",
    "report": "Accuracy, Macro-F1, pair accuracy, NCU, modality deltas, paired tests and position bias (swap).",
    "audit": "Evidence-grounded accuracy: two people judge each reply blind; κ, AC1, adjudication; 'report --ega'.",
    "demo": "Run the whole workflow offline on examples/mini, in about a minute.",
    "weights": "Model weights on this machine: list them, fetch or import LPIPS's backbone.",
    "view": "Browse the workspace: runs, the report tables, every case with each model's reply, the counterfactual "
            "pairs.",
    "study": "Run several models on several suites from one study file, and report them together.",
}


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["debug"] = True


def _first_sentence(text: str) -> str:
    paragraph = inspect.cleandoc(text).split("\n\n", 1)[0].replace("\n", " ")
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def _accept_debug_everywhere(command: click.Command) -> click.Command:
    """Give ``command`` (and, for a group, its subcommands) a ``--debug`` flag, so it may follow the subcommand.

    A command without a short help gets its help's first sentence as one, so
    listings never cut a summary mid-sentence (Click shortens it to fit).
    """
    if command.short_help is None and command.help:
        command.short_help = _first_sentence(command.help)
    if not any(p.name == "debug" for p in command.params):
        command.params.append(click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True,
                                           callback=_set_debug, help="Show tracebacks instead of one-line errors."))
    from cfkit.cli.once import refuse_repeats

    refuse_repeats(command)  # a single-value option given twice is refused, never last-wins
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_debug_everywhere(sub)
    return command


class CfkitGroup(click.Group):
    """A group that imports each command's module on first use and renders cfkit errors."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (module, _) in COMMANDS.items() if importlib.util.find_spec(module) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name]
        if importlib.util.find_spec(module) is None:
            return None
        return _accept_debug_everywhere(getattr(importlib.import_module(module), attr))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``cfkit --help``, from SUMMARIES: no command module is imported to draw it."""
        rows = []
        for name in self.list_commands(ctx):
            if name in SUMMARIES:
                rows.append((name, SUMMARIES[name]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from cfkit.cli.once import refusal, repeated_options

        repeated = [] if ctx.resilient_parsing else repeated_options(self, ctx, args)
        if repeated:
            raise click.UsageError(refusal(repeated[0]), ctx=ctx)
        return super().parse_args(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's usage errors become one line in cfkit's style (exit status 2), like cfkit's own errors."""
        prog_name = prog_name or "cfkit"
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            # Not standalone, Click returns the status of ctx.exit() instead of exiting; commands return None.
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            from cfkit.cli.console import error

            error("aborted; nothing was changed by the question that was declined.")
            sys.exit(1)
        except click.UsageError as exc:
            from cfkit.cli.console import error

            command = exc.ctx.command_path if exc.ctx is not None else "cfkit"
            error(f"{exc.format_message()} See '{command} --help'.")
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            from cfkit.cli.console import error

            error(exc.format_message())
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CfkitError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from cfkit.cli.console import error

            if str(exc):  # an InputRejected without a message: the command listed the problems itself
                error(str(exc))
            ctx.exit(exc.exit_code)
        except OSError as exc:  # a writer that did not say it itself: a read-only folder, a full disk
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from cfkit.cli.console import error

            where = f" {exc.filename}" if exc.filename else ""
            error(f"cannot write or read{where} ({exc.strerror or exc}); check the folder's permissions and free "
                  "disk space, then run the command again. What was saved before is kept.")
            ctx.exit(2)
        except KeyboardInterrupt as exc:
            from cfkit.cli.console import error

            error("interrupted; everything saved before the interruption is kept. Run the command again to resume.")
            ctx.exit(getattr(exc, "exit_code", 130))  # 143 after SIGTERM (cfkit.probe.runner.Terminated)


@click.group(cls=CfkitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="cfkit")
@click.option("-w", "--workspace", "workspace", metavar="DIR", default=None,
              help="Workspace folder (default: $CFKIT_WORKSPACE, or the nearest folder with cfkit.toml).")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, debug: bool) -> None:
    """Counterfactual and diagnostic probes for contextual aesthetic suitability.

    Does a vision-language model's suitability judgment follow the decisive
    visual cue, or only the image's surface appeal? cfkit makes counterfactual
    edit pairs, checks and reviews them, asks models under Text / Neutral /
    Evidence / Image conditions, and reports the paper's metrics.

    \b
    Start here:
      cfkit demo                      the whole workflow offline, in a minute
      cfkit specs list                the counterfactual pairs of this workspace
      cfkit edit CF18                 make an edit, then 'cfkit review CF18'
      cfkit probe run --model openai:gpt-5.5 --suite counterfactual
      cfkit report --reference
    """
    ctx.ensure_object(dict)
    ctx.obj["workspace"] = workspace
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="cfkit")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
