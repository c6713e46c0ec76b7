"""The `appliance` command line: click commands only, the work is done elsewhere."""

from __future__ import annotations

import sys
import traceback

import click

from harness import __version__
from harness.errors import ApplianceError

_DEBUG = False


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="appliance")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
def cli(debug: bool) -> None:
    """MLPerf Inference benchmark appliance.

    \b
    Examples:
      appliance prepare --benchmark resnet50
      appliance run --benchmark resnet50 --scenario Offline
      appliance topology detect --format table
    """
    global _DEBUG
    _DEBUG = debug


def _register_subcommands() -> None:
    from harness.topology.cli import topology

    cli.add_command(topology)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line per error, a non-zero exit code, tracebacks only with --debug."""
    _register_subcommands()
    try:
        cli.main(args=argv, prog_name="appliance", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("appliance: interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ApplianceError as exc:
        if _DEBUG:
            traceback.print_exc()
        click.echo(f"appliance: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("appliance: interrupted", err=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - last line of defence, the user gets one line
        if _DEBUG:
            traceback.print_exc()
        else:
            click.echo(f"appliance: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
