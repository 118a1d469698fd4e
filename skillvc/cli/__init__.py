"""The ``skillvc`` command line: the click group and its error mapping.

Every command lives in ``cli/commands/`` (one module each, registered here); each parses
options, makes one library call and renders the result. Errors from the
``SkillvcError`` family become one sentence plus a hint and a stable exit code; anything else
is a crash (exit 70) whose traceback ``SKILLVC_RAISE_ERRORS=1`` shows.
"""

from __future__ import annotations

import gc
import signal
import sys
from typing import Any

import click

from skillvc import __version__
from skillvc.core.errors import (
    INTERNAL_ERROR_EXIT_CODE,
    SkillvcError,
    error_lines,
    one_line,
    redact,
    should_reraise,
    storage_error,
)
from skillvc.models.backends import children
from skillvc.secrets import scrubbed_output


class SkillvcGroup(click.Group):
    """Turns library errors into one clear sentence, a hint and a stable exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        # Everything printed, by any command, loses the values of known secrets (any encoding).
        # SIGTERM (timeout, systemd, docker stop) and SIGHUP end a run like Ctrl-C does.
        with scrubbed_output(), children.stop_on_signals():
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillvcError as exc:
            if should_reraise():
                raise
            click.echo(f"Error: {_printable(exc.message)}", err=True)
            if exc.hint:
                click.echo(f"Hint: {_printable(exc.hint)}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # Output piped into `head` and closed early: not an error worth a traceback.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(1)
        except KeyboardInterrupt as exc:
            # Agents were killed by their process group and scratch folders removed on the
            # way here (``children``); the event log holds only what completed.
            signum = exc.signum if isinstance(exc, children.Interrupted) else signal.SIGINT
            by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
            training = ctx.invoked_subcommand == "train"
            resume = "; run 'skillvc train' again to resume" if training else ""
            click.echo(f"Interrupted{by}{resume}.", err=True)
            ctx.exit(128 + signum)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if should_reraise():
                raise
            known = storage_error(exc)  # a full disk or read-only file system is not a bug
            if known is not None:
                click.echo(f"Error: {_printable(known.message)}", err=True)
                click.echo(f"Hint: {_printable(known.hint)}", err=True)
                ctx.exit(known.exit_code)
            click.echo(
                f"skillvc crashed: {type(exc).__name__}: {redact(str(exc))}\n"
                "Set SKILLVC_RAISE_ERRORS=1 to see the traceback, and please report it.",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT_CODE)


def _printable(text: str) -> str:
    """An error message or hint as printed: secrets redacted and control characters escaped
    in each line, so only the line breaks skillvc wrote on purpose (``Lines``) survive."""
    return "\n".join(one_line(redact(line)) for line in error_lines(text))


@click.group(cls=SkillvcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="skillvc")
def cli() -> None:
    """Train LLM agent skills like neural networks, with every step under version control.

    \b
    skillvc demo            the whole loop offline on a bundled example
    skillvc init            set up a skills repo (skillvc.toml, .skillvc/)
    skillvc train           train the skill; accepted edits become commits
    skillvc log --rejected  what was tried and refused
    skillvc report          a pull-request description of a run
    skillvc check --base R  the gate, applied to any change
    skillvc help terms      what the words skillvc prints mean
    """


def _register_command_modules() -> None:
    import importlib
    import pkgutil

    # cli/__init__ is still being imported here, so ``skillvc.cli`` is not yet an attribute
    # of ``skillvc``: take the commands package from the import itself.
    from skillvc.cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"skillvc.cli.commands.{info.name}")
        cli.add_command(module.command)


_register_command_modules()


def main() -> None:
    try:
        cli(prog_name="skillvc")
    finally:
        # Python's last collection at exit walks every object still alive, the model SDKs'
        # thousands of classes among them: half a second after a training run, spent as the
        # process ends. Frozen objects are skipped by it; each is still finalized as before.
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
