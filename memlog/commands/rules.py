"""`memlog rules list|explain`: the rules that judge a run (memlog.judge.rulekit)."""

from __future__ import annotations

from typing import Annotated

import typer

from memlog.commands.common import Debug, guard

rules_app = typer.Typer(no_args_is_help=True, help="The rules that judge a run.")


@rules_app.command("list")
def rules_list(debug: Debug = False) -> None:
    """List the rules, in the order they run."""
    from memlog.judge.rulekit import rules_listing

    def action():
        for line in rules_listing():
            typer.echo(line)

    guard(debug, action)


@rules_app.command("explain")
def rules_explain(rule_id: Annotated[str, typer.Argument(metavar="ID")], debug: Debug = False) -> None:
    """What a rule checks, its thresholds, examples, and what it does not mean."""
    from memlog.judge.rulekit import explain

    guard(debug, lambda: typer.echo(explain(rule_id)))
